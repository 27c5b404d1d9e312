#!/usr/bin/env python3
"""tools/render_haproxy_configmap.py — writes deploy/haproxy.cfg into the ConfigMap of
deploy/kubernetes/haproxy.yaml, so the balancer in Kubernetes runs the same configuration.

What differs in Kubernetes is kept from the ConfigMap as it is: the replica block (a
server-template filled from the headless Service's DNS records), the resolvers section at
the end, and the stats listener on every address (for Prometheus) instead of 127.0.0.1.
tests/cluster/test_deploy.py fails when the two have drifted apart; run this to bring the
ConfigMap back in step:

  tools/render_haproxy_configmap.py
"""
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CFG = os.path.join(ROOT, "deploy", "haproxy.cfg")
MANIFEST = os.path.join(ROOT, "deploy", "kubernetes", "haproxy.yaml")
BEGIN, END = "    # ---- replicas", "    # ---- end of replicas ----"


def render(cfg, current):
    """deploy/haproxy.cfg with the ConfigMap's own replica block and resolvers section."""
    block = current[current.index(BEGIN):current.index(END)]
    resolvers = current[current.index("\nresolvers "):]
    out = cfg[:cfg.index(BEGIN)] + block + cfg[cfg.index(END):]
    return out.replace("    bind 127.0.0.1:8404\n", "    bind :8404\n").rstrip("\n") + "\n" + resolvers


def main():
    text = open(MANIFEST).read()
    current = next(yaml.safe_load_all(text))["data"]["haproxy.cfg"]
    new = render(open(CFG).read(), current)
    # The ConfigMap's literal block: every line indented by 4, blank lines left empty.
    body = "".join("    " + line if line.strip() else "\n" for line in new.splitlines(True))
    head = "  haproxy.cfg: |\n"
    start = text.index(head) + len(head)
    end = text.index("\n---\napiVersion", start) + 1
    text = text[:start] + body + text[end:]
    if next(yaml.safe_load_all(text))["data"]["haproxy.cfg"] != new:
        sys.exit("render_haproxy_configmap: the rewritten manifest does not read back as the rendered config")
    with open(MANIFEST, "w") as f:
        f.write(text)
    print(f"{os.path.relpath(MANIFEST, ROOT)}: ConfigMap haproxy.cfg {'updated' if new != current else 'unchanged'}")


if __name__ == "__main__":
    main()
