"""tests/model/config_check.py — the bad-config check the architecture tests share: a copy
of a good checkpoint with config.json edited must make `nextn debug-logits` exit 2 with a
message containing the expected text, and write no output."""
import json
import os
import shutil
import subprocess


def assert_bad_config(test, bin_path, good_dir, dst, edit, expect):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(good_dir, dst)
    path = os.path.join(dst, "config.json")
    with open(path) as f:
        c = json.load(f)
    edit(c)
    with open(path, "w") as f:
        json.dump(c, f)
    p = subprocess.run([bin_path, "debug-logits", "--model", dst, "--prompt-tokens", "1,2,3", "--out",
                        os.path.join(dst, "out")], capture_output=True, text=True, timeout=60)
    name = os.path.basename(dst)
    test.assertEqual(p.returncode, 2, f"{name}: {p.stdout}{p.stderr}")
    test.assertIn(expect, p.stderr, name)
    test.assertFalse(os.path.exists(os.path.join(dst, "out.prefill.npy")), name)
