"""tests/cluster/test_cluster_sh.py — scripts/cluster.sh end to end.

`scripts/cluster.sh 2` brings up two replicas and HAProxy; requests with different
sessions are answered through the balancer by both replicas; SIGTERM stops the script,
HAProxy and every replica (nothing of its process group is left) and removes its
temporary folder. Bad arguments get the usage line and exit status 2.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from serverlib import BIN, SRC, TMP, check  # noqa: E402
from test_cluster import HAPROXY, free_port  # noqa: E402

SCRIPT = os.path.join(SRC, "scripts", "cluster.sh")


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def main():
    check(os.path.exists(HAPROXY), "haproxy is missing: scripts/setup.sh --tests installs Debian's haproxy")
    for bad in (["0"], ["x"], ["2", "--parallel", "2"]):
        r = subprocess.run([SCRIPT, *bad], capture_output=True, text=True)
        check(r.returncode == 2 and "usage: scripts/cluster.sh N" in r.stderr, f"cluster.sh {bad}: {r}")

    port, stats = free_port(), free_port()
    os.makedirs(TMP, exist_ok=True)
    err = tempfile.NamedTemporaryFile("w+", dir=TMP, prefix="cluster-sh.", suffix=".log", delete=False)
    env = dict(os.environ, PORT=str(port), STATS_PORT=str(stats), NEXTN_BIN=BIN)
    # Its own process group, as a terminal would give it, so the check below can see that
    # nothing of it is left.
    proc = subprocess.Popen([SCRIPT, "2", "--", "--parallel", "2"], env=env, stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True)
    try:
        deadline = time.time() + 60
        log = ""
        while "cluster: HAProxy at" not in log:
            check(proc.poll() is None, f"cluster.sh exited early ({proc.returncode}): {log}")
            check(time.time() < deadline, f"cluster.sh not up within 60 s: {log}")
            time.sleep(0.1)
            log = open(err.name).read()
        folder = re.search(r"logs in (\S+)", log)[1]
        check(os.path.isdir(folder), f"no temporary folder {folder}")
        seen = set()
        for i in range(12):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            for _ in range(100):  # HAProxy's listener may come up just after the log line
                try:
                    conn.request("POST", "/v1/chat/completions",
                                 json.dumps({"messages": [{"role": "user", "content": f"Hello {i}"}], "max_tokens": 3}),
                                 {"Content-Type": "application/json", "X-Session-Id": f"session-{i}"})
                    break
                except ConnectionRefusedError:
                    conn.close()
                    time.sleep(0.05)
            r = conn.getresponse()
            body = r.read()
            check(r.status == 200, f"through cluster.sh's balancer: {r.status} {body[:200]!r}")
            seen.add(r.getheader("X-Nextn-Replica"))
            conn.close()
        check(seen == {"replica1", "replica2"}, f"12 sessions were answered by {seen}, not by both replicas")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        err.close()
    check(code == 143, f"cluster.sh exit status after SIGTERM: {code}")
    check(not group_alive(proc.pid), "replicas or HAProxy outlived cluster.sh")
    check(not os.path.exists(folder), f"cluster.sh left {folder}")
    os.unlink(err.name)
    print("test_cluster_sh: ok")


if __name__ == "__main__":
    main()
