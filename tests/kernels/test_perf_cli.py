#!/usr/bin/env python3
"""tests/kernels/test_perf_cli.py — `nextn perf` runs and reports well-formed figures.

No timing asserts: checks the JSON fields exist, are positive and consistent
(k rows measured for k = 1..max_k, relative cost of k = 1 is exactly 1, decode
GB/s = weight GB × tok/s, every weight type in --kernels; --contexts: one entry per
length, KV bytes growing with it and scaling with --kv-type, bytes per token = weights +
KV, on a dense, a hybrid and a sliding-window model; --sequences: the verify table over
that many sequences), and that bad flags exit with code 2.
"""
import json
import os
import subprocess
import sys
import tempfile

BIN = os.environ["NEXTN_BIN"]
SRC = os.environ["NEXTN_SOURCE_DIR"]
TMP = os.environ.get("NEXTN_TEST_TMP", tempfile.gettempdir())


def run(args):
    return subprocess.run([BIN, "perf", *args], capture_output=True, text=True, timeout=600)


def main():
    os.makedirs(TMP, exist_ok=True)
    # Bandwidth only.
    r = run(["--threads", "2", "--bandwidth-mib", "64", "--repeats", "1", "--json"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["threads"] == 2 and out["read_bandwidth_gbs"] > 0 and out["simd_target"], out
    assert "model" not in out

    # With a tiny generated checkpoint.
    model = os.path.join(TMP, "perf-tiny-qwen3")
    subprocess.run([sys.executable, os.path.join(SRC, "tools/make_checkpoint.py"), "--arch", "qwen3",
                    "--preset", "tiny", "--dtype", "bf16", "--out", model, "--quiet"], check=True)
    for extra in ([], ["--mmap"]):
        r = run(["--threads", "2", "--bandwidth-mib", "64", "--repeats", "1", "--model", model,
                 "--prefill", "16", "--decode-steps", "2", "--max-k", "5", "--json", *extra])
        assert r.returncode == 0, r.stderr
        m = json.loads(r.stdout)["model"]
        assert m["weights"] == ("mmap" if extra else "copied"), m
        assert m["architecture"] == "Qwen3ForCausalLM", m
        assert m["decode_tokens_per_s"] > 0 and m["prefill_tokens_per_s"] > 0 and m["weight_gb"] > 0, m
        assert abs(m["decode_weight_gbs"] - m["weight_gb"] * m["decode_tokens_per_s"]) < 1e-6 * m["decode_weight_gbs"] + 1e-9
        assert [v["k"] for v in m["verify"]] == [1, 2, 3, 4, 5], m["verify"]
        assert m["verify"][0]["relative_to_k1"] == 1.0
        assert all(v["ms"] > 0 for v in m["verify"])
        assert 0 <= m["restore_ms"] < m["verify"][-1]["ms"], m["restore_ms"]

    # Several prefill lengths: one entry each, in the order given; the first is also the
    # top-level prefill_tokens / prefill_tokens_per_s.
    r = run(["--threads", "2", "--bandwidth-mib", "64", "--repeats", "2", "--model", model,
             "--prefill", "24,8", "--decode-steps", "2", "--max-k", "1", "--json"])
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)["model"]
    assert [p["tokens"] for p in m["prefill"]] == [24, 8], m["prefill"]
    assert all(p["tokens_per_s"] > 0 and abs(p["tokens"] / p["seconds"] - p["tokens_per_s"]) < 1e-6 * p["tokens_per_s"]
               for p in m["prefill"]), m["prefill"]
    assert m["prefill_tokens"] == 24 and m["prefill_tokens_per_s"] == m["prefill"][0]["tokens_per_s"], m
    r = run(["--bandwidth-mib", "64", "--repeats", "1", "--model", model, "--prefill", "16,0"])
    assert r.returncode == 2 and "--prefill" in r.stderr, (r.returncode, r.stderr)

    # Decode after long contexts (KV rows filled directly), per KV storage type.
    kv_gb = {}
    for kv_type in ("f16", "bf16", "f32"):
        r = run(["--threads", "2", "--bandwidth-mib", "64", "--repeats", "1", "--model", model, "--prefill", "8",
                 "--decode-steps", "2", "--max-k", "1", "--contexts", "200,700", "--kv-type", kv_type, "--json"])
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        m = out["model"]
        assert m["kv_type"] == kv_type, m
        contexts = m["contexts"]
        assert [c["context"] for c in contexts] == [200, 700], contexts
        for c in contexts:
            assert c["decode_tokens_per_s"] > 0 and c["kv_gb"] > 0, c
            assert abs(c["read_gb_per_token"] - (m["weight_gb"] + c["kv_gb"])) < 1e-9, c
            assert abs(c["read_gbs"] - c["read_gb_per_token"] * c["decode_tokens_per_s"]) < 1e-6 * c["read_gbs"], c
            assert abs(c["fraction_of_bandwidth"] - c["read_gbs"] / out["read_bandwidth_gbs"]) < 1e-9, c
        # Every layer stores every position: the KV bytes grow with the context.
        assert abs(contexts[1]["kv_gb"] / contexts[0]["kv_gb"] - 700 / 200) < 1e-9, contexts
        kv_gb[kv_type] = contexts[0]["kv_gb"]
    assert kv_gb["f16"] == kv_gb["bf16"] and abs(kv_gb["f32"] - 2 * kv_gb["f16"]) < 1e-12, kv_gb
    # Recurrent layers (hybrid) keep their state; sliding-window rings and layers reading
    # another layer's KV (Gemma 4) are filled in pieces the rings hold.
    for arch in ("qwen3_5", "gemma4"):
        other = os.path.join(TMP, "perf-tiny-" + arch)
        subprocess.run([sys.executable, os.path.join(SRC, "tools/make_checkpoint.py"), "--arch", arch,
                        "--preset", "tiny", "--out", other, "--quiet"], check=True)
        r = run(["--threads", "2", "--bandwidth-mib", "64", "--repeats", "1", "--model", other, "--prefill", "8",
                 "--decode-steps", "2", "--max-k", "1", "--contexts", "300", "--json"])
        assert r.returncode == 0, (arch, r.stderr)
        c = json.loads(r.stdout)["model"]["contexts"]
        assert len(c) == 1 and c[0]["context"] == 300 and c[0]["decode_tokens_per_s"] > 0 and c[0]["kv_gb"] > 0, c
        # A batched verify: three sequences of k rows each, rolled back between runs
        # (recurrent state, sliding-window rings).
        r = run(["--threads", "2", "--bandwidth-mib", "64", "--repeats", "1", "--model", other, "--prefill", "8",
                 "--decode-steps", "2", "--max-k", "3", "--sequences", "3", "--json"])
        assert r.returncode == 0, (arch, r.stderr)
        m = json.loads(r.stdout)["model"]
        assert m["verify_sequences"] == 3 and [v["k"] for v in m["verify"]] == [1, 2, 3], m
        assert all(v["ms"] > 0 for v in m["verify"]), m["verify"]

    # The per-type matmul: every weight type and interleaved layout, each row count timed.
    r = run(["--threads", "2", "--bandwidth-mib", "64", "--repeats", "1", "--kernels", "--json"])
    assert r.returncode == 0, r.stderr
    kernels = json.loads(r.stdout)["kernels"]
    names = [k["type"] for k in kernels]
    for name in ("F32", "BF16", "Q8_0", "Q8_0x16", "Q4_0", "Q4_0x16", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q4_Kx16",
                 "Q5_K", "Q6_K", "Q6_Kx16", "MLX4_G64", "MLX8_G64"):
        assert name in names, names
    for k in kernels:
        assert sorted(k["us_by_rows"], key=int) == ["1", "4", "8", "32"], k
        assert all(v > 0 for v in k["us_by_rows"].values()) and k["bytes"] > 0 and k["weight_gbs_1_row"] > 0, k

    # The table form names every section.
    r = run(["--bandwidth-mib", "64", "--repeats", "1", "--model", model, "--prefill", "8",
             "--decode-steps", "1", "--max-k", "2"])
    assert r.returncode == 0, r.stderr
    for word in ("read bandwidth", "decode", "prefill", "verify cost"):
        assert word in r.stdout, r.stdout

    # Bad input: exit code 2 with a message.
    for bad in (["--max-k", "0"], ["--sequences", "0"], ["--bandwidth-mib", "1"], ["--contexts", "0"], ["--kv-type", "f8"], ["--model", os.path.join(TMP, "no-such-model")]):
        r = run(["--repeats", "1", "--bandwidth-mib", "64", *bad] if "--bandwidth-mib" not in bad else ["--repeats", "1", *bad])
        assert r.returncode == 2, (bad, r.returncode, r.stderr)
        assert r.stderr.strip(), bad
    print("perf cli: ok")


if __name__ == "__main__":
    main()
