"""tests/server/serverlib.py — start/stop `nextn serve` for the server tests.

Each test generates (once, cached under NEXTN_TEST_TMP) a tiny random checkpoint with
tools/make_checkpoint.py, starts `$NEXTN_BIN serve --port 0` (the server picks a free
loopback port and reports it in its JSON ready line) and stops it by PID.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SRC = os.environ.get("NEXTN_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.environ.get("NEXTN_BIN", os.path.join(SRC, "build", "nextn"))
TMP = os.environ.get("NEXTN_TEST_TMP", os.path.join(tempfile.gettempdir(), "nextn-test-tmp"))


def checkpoint(name="server-qwen3", *extra):
    """Path of a tiny random qwen3 checkpoint (generated once)."""
    out = os.path.join(TMP, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    os.makedirs(TMP, exist_ok=True)
    work = tempfile.mkdtemp(dir=TMP, prefix=name + ".")
    subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--arch", "qwen3",
                    "--quiet", *extra, "--out", work], check=True)
    try:
        os.rename(work, out)
    except OSError:  # another test won the race
        pass
    return out


def checkpoint_with_template(name, template):
    """A copy of checkpoint() whose tokenizer_config.json carries `template` (made once)."""
    out = os.path.join(TMP, name)
    if not os.path.exists(out):
        shutil.copytree(checkpoint(), out + ".tmp")
        path = os.path.join(out + ".tmp", "tokenizer_config.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["chat_template"] = template
        with open(path, "w") as f:
            json.dump(cfg, f)
        os.rename(out + ".tmp", out)
    return out


class Server:
    """A running `nextn serve`; use as a context manager."""

    def __init__(self, *args, model=None, ready_timeout=120):
        self.model_dir = model or checkpoint()
        self.log_path = os.path.join(TMP, f"serve-{os.getpid()}-{time.monotonic_ns()}.log")
        os.makedirs(TMP, exist_ok=True)
        self.log = open(self.log_path, "w")
        threads = [] if "--threads" in args else ["--threads", "1"]
        cmd = [BIN, "serve", "--model", self.model_dir, "--port", "0", *threads, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.ready = None
        deadline = time.time() + ready_timeout
        lines = []
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("{"):
                self.ready = json.loads(line)
                break
        if not self.ready:
            self.stop()
            raise RuntimeError("server did not become ready: " + "".join(lines) + "\n" + self.read_log())
        self.human_line = self.proc.stdout.readline()
        self.port = self.ready["port"]
        self.url = f"http://127.0.0.1:{self.port}"

    def read_log(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, timeout=30):
        """SIGTERM, wait; returns the exit code (SIGKILL after timeout → test failure upstream)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        self.log.close()

    # HTTP helpers -------------------------------------------------------------
    def request(self, method, path, body=None, headers=None, raw=None, timeout=120):
        """Returns (status, parsed JSON or text)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, text = r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def stream(self, path, body, timeout=120):
        """Streams an SSE response; returns the list of parsed data payloads ('[DONE]' kept as a string)."""
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        events = []
        with urllib.request.urlopen(req, timeout=timeout) as r:
            assert r.headers.get("Content-Type", "").startswith("text/event-stream"), r.headers
            buf = b""
            for chunk in iter(lambda: r.read1(65536), b""):
                buf += chunk
                while b"\n\n" in buf:
                    frame, buf = buf.split(b"\n\n", 1)
                    for line in frame.decode().split("\n"):
                        if line.startswith("data: "):
                            payload = line[6:]
                            events.append(payload if payload == "[DONE]" else json.loads(payload))
        return events


def stream_text(events):
    """Concatenated delta content (chat) or text (completions) of an SSE event list."""
    out = ""
    for e in events:
        if isinstance(e, dict):
            for c in e.get("choices", []):
                if "delta" in c:
                    out += c["delta"].get("content") or ""
                else:
                    out += c.get("text") or ""
    return out


def check(cond, msg):
    if not cond:
        print("FAIL:", msg, file=sys.stderr)
        sys.exit(1)
