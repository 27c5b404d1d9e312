"""tests/cluster/test_deploy.py — offline checks of what deploy/ ships.

No Kubernetes schema validator (kubeconform, kubeval) is packaged in Debian 12, so the
manifests are checked here with python3-yaml against what each kind needs: known
apiVersion/kind pairs, names, selectors that match pod labels, Services whose ports
reach a container port, probes (readiness and startup on /health, liveness on an
endpoint that stays 200 while a replica is full or draining), an autoscaler that targets
the Deployment on queue depth, and `nextn serve` arguments that the binary accepts.
HAProxy checks its configurations itself (`haproxy -c`): deploy/haproxy.cfg and the copy
in the Kubernetes ConfigMap, which must differ from it only where Kubernetes needs.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from serverlib import BIN, SRC, check  # noqa: E402

try:
    import yaml
except ImportError:
    print("FAIL: python3-yaml is missing: scripts/setup.sh --tests installs it", file=sys.stderr)
    sys.exit(1)

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
KNOWN = {("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap"),
         ("autoscaling/v2", "HorizontalPodAutoscaler")}


def haproxy_check(text, what):
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run([HAPROXY, "-c", "-f", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    check(r.returncode == 0, f"haproxy -c rejects {what}:\n{r.stdout}{r.stderr}")


def without_replicas(text):
    """The config with the replica block's lines and anything after a resolvers section dropped."""
    out, skip = [], False
    for line in text.splitlines():
        if line.startswith("resolvers "):
            break
        if "# ---- replicas" in line:
            skip = True
            continue
        if "# ---- end of replicas" in line:
            skip = False
            continue
        if not skip:
            out.append(line)
    return "\n".join(out).rstrip() + "\n"


def containers(deployment):
    return deployment["spec"]["template"]["spec"]["containers"]


def check_deployment(d, where):
    spec = d.get("spec") or {}
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    check(match and all(labels.get(k) == v for k, v in match.items()),
          f"{where}: spec.selector.matchLabels {match} not all in the pod labels {labels}")
    cs = containers(d)
    check(cs, f"{where}: no containers")
    for c in cs:
        for field in ("name", "image", "ports"):
            check(c.get(field), f"{where}: container without {field}")
        for p in c["ports"]:
            check(isinstance(p.get("containerPort"), int), f"{where}: port without an integer containerPort: {p}")
        for probe in ("readinessProbe", "livenessProbe"):
            check(probe in c, f"{where}: container {c['name']} has no {probe}")


def probe_path(container, probe):
    return ((container.get(probe) or {}).get("httpGet") or {}).get("path")


def serve_flags():
    """Long options `nextn serve --help` lists (the binary is the authority on its flags)."""
    r = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True)
    check(r.returncode == 0, f"{BIN} serve --help failed: {r.stderr}")
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", r.stdout))


def main():
    check(os.path.exists(HAPROXY), "haproxy is missing: scripts/setup.sh --tests installs Debian's haproxy")
    shipped = open(os.path.join(SRC, "deploy", "haproxy.cfg")).read()
    haproxy_check(shipped, "deploy/haproxy.cfg")

    docs = []
    files = sorted(glob.glob(os.path.join(SRC, "deploy", "kubernetes", "*.yaml")))
    check(files, "no manifests in deploy/kubernetes")
    for path in files:
        text = open(path).read()
        check(text.startswith("# deploy/kubernetes/" + os.path.basename(path)),
              f"{path}: must start with a header comment naming the file")
        for i, doc in enumerate(yaml.safe_load_all(text)):
            if doc is None:
                continue
            where = f"{os.path.basename(path)}[{i}]"
            check((doc.get("apiVersion"), doc.get("kind")) in KNOWN,
                  f"{where}: unexpected apiVersion/kind {doc.get('apiVersion')}/{doc.get('kind')}")
            check(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", (doc.get("metadata") or {}).get("name", "")),
                  f"{where}: metadata.name missing or not a DNS label")
            docs.append((where, doc))

    by_kind = {}
    for where, doc in docs:
        by_kind.setdefault(doc["kind"], []).append((where, doc))
    deployments = {d["metadata"]["name"]: (w, d) for w, d in by_kind.get("Deployment", [])}
    check({"nextn", "nextn-haproxy"} <= set(deployments), f"Deployments: {sorted(deployments)}")
    for name, (where, d) in deployments.items():
        check_deployment(d, where)

    # The replicas: readiness and startup follow /health (503 while loading, full or
    # draining); liveness must not, or a full replica would be restarted.
    replica = containers(deployments["nextn"][1])[0]
    check(probe_path(replica, "readinessProbe") == "/health", "the replicas' readinessProbe must GET /health")
    check(probe_path(replica, "startupProbe") == "/health", "the replicas' startupProbe must GET /health")
    check(probe_path(replica, "livenessProbe") not in (None, "/health", "/v1/health"),
          "the replicas' livenessProbe must be an HTTP GET of an endpoint that stays 200 while full or draining")
    args = replica.get("args") or []
    check(args[:1] == ["serve"], f"the replica runs `nextn serve`: {args}")
    flags = serve_flags()
    for a in args[1:]:
        flag = a.split("=", 1)[0]
        check(flag in flags, f"`nextn serve` has no option {flag} (manifest args {args})")
    grace = deployments["nextn"][1]["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    seconds = {a.split("=", 1)[0]: float(a.split("=", 1)[1]) for a in args
               if a.startswith(("--drain-delay=", "--shutdown-grace="))}
    check(grace > seconds.get("--drain-delay", 0) + seconds.get("--shutdown-grace", 10),
          "terminationGracePeriodSeconds must cover --drain-delay + --shutdown-grace")

    # Services select a Deployment's pods and reach one of its container ports.
    for where, svc in by_kind.get("Service", []):
        sel = svc["spec"].get("selector") or {}
        targets = [d for _, d in deployments.values()
                   if sel and all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())]
        check(len(targets) == 1, f"{where}: selector {sel} matches {len(targets)} Deployments")
        ports = containers(targets[0])[0]["ports"]
        for p in svc["spec"]["ports"]:
            t = p.get("targetPort", p.get("port"))
            check(any(t in (cp.get("name"), cp["containerPort"]) for cp in ports),
                  f"{where}: targetPort {t} is no container port of the Deployment")

    # The autoscaler scales the replicas on a per-pod queue-depth metric.
    hpas = by_kind.get("HorizontalPodAutoscaler", [])
    check(len(hpas) == 1, "one HorizontalPodAutoscaler expected")
    where, hpa = hpas[0]
    ref = hpa["spec"]["scaleTargetRef"]
    check(ref.get("kind") == "Deployment" and ref.get("name") == "nextn", f"{where}: scaleTargetRef {ref}")
    check(1 <= hpa["spec"].get("minReplicas", 1) <= hpa["spec"]["maxReplicas"], f"{where}: replica bounds")
    names = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m.get("type") == "Pods"]
    check("vllm_num_requests_waiting" in names, f"{where}: no Pods metric on queue depth: {names}")
    adapter = [d for _, d in by_kind.get("ConfigMap", []) if d["metadata"]["name"] == "nextn-metrics-adapter"]
    check(adapter, "the prometheus-adapter rule ConfigMap is missing")
    rules = yaml.safe_load(adapter[0]["data"]["config.yaml"])["rules"]
    check(any(r["name"]["as"] == "vllm_num_requests_waiting" for r in rules), "no adapter rule serves the HPA's metric")

    # The balancer's ConfigMap: deploy/haproxy.cfg but for the replica list (and the stats
    # listener, open to Prometheus in a pod), and valid for HAProxy.
    cms = [d for _, d in by_kind.get("ConfigMap", []) if d["metadata"]["name"] == "nextn-haproxy"]
    check(cms, "the HAProxy ConfigMap is missing")
    k8s_cfg = cms[0]["data"]["haproxy.cfg"]
    haproxy_check(k8s_cfg, "the ConfigMap's haproxy.cfg")
    expect = without_replicas(shipped).replace("    bind 127.0.0.1:8404\n", "    bind :8404\n")
    check(without_replicas(k8s_cfg) == expect,
          "deploy/kubernetes/haproxy.yaml's haproxy.cfg has drifted from deploy/haproxy.cfg: "
          "run tools/render_haproxy_configmap.py")
    check("server-template replica" in k8s_cfg, "the ConfigMap's config does not discover replicas by DNS")
    print("test_deploy: ok")


if __name__ == "__main__":
    main()
