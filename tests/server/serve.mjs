// tests/server/serve.mjs — start and stop `nextn serve` for the node tests (the JS twin of
// serverlib.py): `--port 0`, resolved once the JSON ready line arrives; stderr to a log
// under NEXTN_TEST_TMP.
import { spawn } from "node:child_process";
import { mkdirSync, openSync } from "node:fs";
import path from "node:path";

const SRC = process.env.NEXTN_SOURCE_DIR ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
export const BIN = process.env.NEXTN_BIN ?? path.join(SRC, "build/nextn");
export const TMP = process.env.NEXTN_TEST_TMP ?? "/tmp/nextn-test-tmp";

// Resolves with {proc, ready}; `name` labels the log file.
export function startServer(name, model, threads, args) {
  mkdirSync(TMP, { recursive: true });
  const log = openSync(path.join(TMP, `serve-${name}-${process.pid}.log`), "a");
  const proc = spawn(BIN, ["serve", "--model", model, "--port", "0", "--threads", String(threads), ...args],
                     { stdio: ["ignore", "pipe", log] });
  return new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error("server not ready")), 120000);
    proc.stdout.on("data", (d) => {
      buf += d;
      const line = buf.split("\n").find((l) => l.startsWith("{"));
      if (line) {
        clearTimeout(timer);
        resolve({ proc, ready: JSON.parse(line) });
      }
    });
    proc.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
}

// SIGTERM; resolves with the exit code.
export function stopServer(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve(proc.exitCode);
    proc.removeAllListeners("exit");
    proc.on("exit", (code) => resolve(code));
    proc.kill("SIGTERM");
  });
}
