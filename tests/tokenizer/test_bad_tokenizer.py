#!/usr/bin/python3
"""tests/tokenizer/test_bad_tokenizer.py — damaged tokenizer files make `nextn generate`
and `nextn tokenize` fail cleanly: exit code 2 and one `nextn: error:` line naming the
file and the entry, never a crash (SIGSEGV), an internal error or a huge allocation.
Each case copies the embedded tiny model's tokenizer files (weights linked) and damages
one entry the way a broken conversion script or a hostile download would."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("NEXTN_BIN") or os.path.join(SRC, "build", "nextn")
TMP_ROOT = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
TINY = os.path.join(SRC, "models", "nextn-tiny")


class BadTokenizerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="bad-tokenizer-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name
        with open(os.path.join(TINY, "tokenizer.json"), encoding="utf-8") as f:
            cls.tokenizer = json.load(f)
        with open(os.path.join(TINY, "tokenizer_config.json"), encoding="utf-8") as f:
            cls.config = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def model(self, name, tokenizer=None, config=None, raw_tokenizer=None):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in os.listdir(TINY):
            if f not in ("tokenizer.json", "tokenizer_config.json") and os.path.isfile(os.path.join(TINY, f)):
                os.symlink(os.path.join(TINY, f), os.path.join(d, f))
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(raw_tokenizer if raw_tokenizer is not None else json.dumps(tokenizer or self.tokenizer))
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config or self.config, f)
        return d

    def expect_error(self, model, *fragments):
        for cmd in (["generate", "--model", model, "--prompt", "hello", "-n", "1", "--threads", "1"],
                    ["tokenize", "--model", model, "hello"]):
            p = subprocess.run([BIN, *cmd], capture_output=True, text=True, timeout=60)
            lines = [line for line in p.stderr.splitlines() if line.strip()]
            self.assertEqual(p.returncode, 2, f"{cmd[0]}: exit {p.returncode}, stderr: {p.stderr}")
            self.assertEqual(len(lines), 1, f"{cmd[0]}: expected one error line, got: {p.stderr!r}")
            self.assertTrue(lines[0].startswith("nextn: error: "), lines[0])
            for fragment in fragments:
                self.assertIn(fragment, lines[0])

    def added(self, **changes):
        t = json.loads(json.dumps(self.tokenizer))
        t["added_tokens"][0].update(changes)
        return t

    def test_intact_copy_works(self):
        d = self.model("intact")
        p = subprocess.run([BIN, "tokenize", "--model", d, "hello"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_negative_added_token_id(self):
        self.expect_error(self.model("neg-added", self.added(id=-5)), "tokenizer.json", "added token id -5")

    def test_huge_added_token_id(self):
        self.expect_error(self.model("huge-added", self.added(id=10**9)), "tokenizer.json", "1000000000")

    def test_added_token_id_not_an_integer(self):
        self.expect_error(self.model("str-added", self.added(id="7")), "tokenizer.json", "integer 'id'")

    def test_added_token_without_content(self):
        t = self.added()
        del t["added_tokens"][0]["content"]
        self.expect_error(self.model("no-content", t), "tokenizer.json", "content")

    def test_added_token_field_of_wrong_type(self):
        self.expect_error(self.model("bad-special", self.added(special="yes")), "tokenizer.json")

    def test_huge_vocab_id(self):
        t = json.loads(json.dumps(self.tokenizer))
        token = next(iter(t["model"]["vocab"]))
        t["model"]["vocab"][token] = 10**9
        self.expect_error(self.model("huge-vocab", t), "tokenizer.json", "model.vocab id 1000000000")

    def test_negative_vocab_id(self):
        t = json.loads(json.dumps(self.tokenizer))
        token = next(iter(t["model"]["vocab"]))
        t["model"]["vocab"][token] = -1
        self.expect_error(self.model("neg-vocab", t), "tokenizer.json", "model.vocab id -1")

    def test_vocab_id_beyond_64_bits(self):
        raw = json.dumps(self.tokenizer)
        token = json.dumps(next(iter(self.tokenizer["model"]["vocab"])))
        value = self.tokenizer["model"]["vocab"][json.loads(token)]
        raw = raw.replace(f"{token}: {value},", f"{token}: 123456789012345678901234567890,", 1)
        self.expect_error(self.model("overflow-vocab", raw_tokenizer=raw), "tokenizer.json", "out of range")

    def test_bad_added_tokens_decoder_key(self):
        c = json.loads(json.dumps(self.config))
        c["added_tokens_decoder"] = {"twelve": {"content": "<x>", "special": True}}
        self.expect_error(self.model("bad-decoder-key", config=c), "tokenizer_config.json", "'twelve'")

    def test_huge_added_tokens_decoder_key(self):
        c = json.loads(json.dumps(self.config))
        c["added_tokens_decoder"] = {"999999999": {"content": "<x>", "special": True}}
        self.expect_error(self.model("huge-decoder-key", config=c), "tokenizer_config.json", "999999999")


if __name__ == "__main__":
    unittest.main(verbosity=2)
