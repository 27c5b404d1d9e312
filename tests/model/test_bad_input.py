#!/usr/bin/python3
"""tests/model/test_bad_input.py — broken checkpoints make `nextn debug-logits` fail cleanly:
exit code 2, exactly one error line on stderr naming the file and the tensor/key, no crash
and no output files. Checkpoints come from tools/make_checkpoint.py and are then damaged
here (truncated, corrupted header, offsets past EOF, wrong shape/dtype, unknown architecture,
missing config keys, missing tensors/shards, end-token ids outside the vocabulary, BPE
merges that are not a list, a chat_template list of junk, a GGUF with an empty dimension
or no tensors at all)."""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("NEXTN_BIN")
TMP_ROOT = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
GEN = os.path.join(SRC, "tools", "make_checkpoint.py")


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_safetensors(path, header, data):
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


class BadInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="bad-input-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name
        cls.good = {}
        for name, args in {"qwen3": ["--arch", "qwen3"],
                           "sharded": ["--arch", "qwen2", "--shards", "2"],
                           "mimo": ["--arch", "mimo"]}.items():
            out = os.path.join(cls.tmp, "good-" + name)
            subprocess.run(["/usr/bin/python3", GEN, "--quiet", "--out", out, *args], check=True)
            cls.good[name] = out

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "_tmp"):
            cls._tmp.cleanup()

    def copy(self, name, base="qwen3"):
        dst = os.path.join(self.tmp, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(self.good[base], dst)
        return dst

    def edit_config(self, model, fn, file="config.json"):
        path = os.path.join(model, file)
        with open(path) as f:
            cfg = json.load(f)
        fn(cfg)
        with open(path, "w") as f:
            json.dump(cfg, f)

    def edit_header(self, model, fn, file="model.safetensors"):
        path = os.path.join(model, file)
        header, data = read_safetensors(path)
        fn(header)
        write_safetensors(path, header, data)

    def expect_error(self, model, *fragments, tokens="1,2,3"):
        prefix = os.path.join(self.tmp, "out", os.path.basename(model))
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        p = subprocess.run([BIN, "debug-logits", "--model", model, "--prompt-tokens", tokens,
                            "--decode", "2", "--threads", "1", "--out", prefix],
                           capture_output=True, text=True, timeout=60)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        self.assertEqual(p.returncode, 2, f"exit {p.returncode}, stderr: {p.stderr}")
        self.assertEqual(len(lines), 1, f"expected one error line, got: {p.stderr!r}")
        self.assertTrue(lines[0].startswith("nextn: error: "), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        self.assertFalse(os.path.exists(prefix + ".prefill.npy"), "wrote output despite the error")
        return lines[0]

    # --- files --------------------------------------------------------------------------
    def test_missing_directory(self):
        missing = os.path.join(self.tmp, "does-not-exist")
        self.expect_error(missing, missing, "not found")

    def test_missing_weights(self):
        m = self.copy("no-weights")
        os.remove(os.path.join(m, "model.safetensors"))
        self.expect_error(m, m, "model.safetensors")

    def test_missing_config(self):
        m = self.copy("no-config")
        os.remove(os.path.join(m, "config.json"))
        self.expect_error(m, "config.json", "not found")

    def test_malformed_config(self):
        m = self.copy("bad-config")
        with open(os.path.join(m, "config.json"), "w") as f:
            f.write('{"architectures": ["Qwen3ForCausalLM"], ')
        self.expect_error(m, "config.json", "malformed JSON")

    def test_missing_shard(self):
        m = self.copy("missing-shard", "sharded")
        os.remove(os.path.join(m, "model-00002-of-00002.safetensors"))
        self.expect_error(m, "model-00002-of-00002.safetensors", "not found")

    def test_malformed_index(self):
        m = self.copy("bad-index", "sharded")
        with open(os.path.join(m, "model.safetensors.index.json"), "w") as f:
            f.write("{\"weight_map\": ")
        self.expect_error(m, "model.safetensors.index.json")

    def test_truncated_file(self):
        m = self.copy("truncated")
        path = os.path.join(m, "model.safetensors")
        header, data = read_safetensors(path)
        last = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
        os.truncate(path, os.path.getsize(path) - 100)
        self.expect_error(m, path, f"'{last}'", "past the end")

    def test_truncated_to_nothing(self):
        m = self.copy("truncated-header")
        path = os.path.join(m, "model.safetensors")
        os.truncate(path, 5)
        self.expect_error(m, path, "truncated")

    def test_header_length_past_eof(self):
        m = self.copy("header-len")
        path = os.path.join(m, "model.safetensors")
        with open(path, "r+b") as f:
            f.write(struct.pack("<Q", os.path.getsize(path)))
        self.expect_error(m, path, "truncated")

    def test_corrupt_json_header(self):
        m = self.copy("corrupt-header")
        path = os.path.join(m, "model.safetensors")
        with open(path, "r+b") as f:
            f.seek(8 + 20)
            f.write(b"\x00}{garbage")
        self.expect_error(m, path, "malformed safetensors JSON header")

    def test_shard_sharded_sizes_checked_too(self):
        m = self.copy("sharded-truncated", "sharded")
        path = os.path.join(m, "model-00001-of-00002.safetensors")
        os.truncate(path, os.path.getsize(path) - 4)
        self.expect_error(m, path, "past the end")

    # --- tensors ------------------------------------------------------------------------
    def test_offsets_past_eof(self):
        m = self.copy("offsets")
        name = "model.layers.1.self_attn.o_proj.weight"

        def fn(h):
            begin, end = h[name]["data_offsets"]
            h[name]["data_offsets"] = [begin + 10**9, end + 10**9]
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", f"'{name}'", "past the end")

    def test_overlapping_tensors(self):
        m = self.copy("overlap")
        a, b = "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight"

        def fn(h):
            h[b]["data_offsets"] = h[a]["data_offsets"]
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", "overlap")

    def test_shape_does_not_match_bytes(self):
        m = self.copy("shape-bytes")
        name = "model.norm.weight"

        def fn(h):
            h[name]["shape"] = [h[name]["shape"][0] + 1]
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", f"'{name}'", "bytes")

    def test_wrong_shape(self):
        m = self.copy("wrong-shape")
        name = "model.layers.0.mlp.up_proj.weight"

        def fn(h):
            h[name]["shape"] = list(reversed(h[name]["shape"]))
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", f"'{name}'", "shape", "expected")

    def test_wrong_dtype(self):
        m = self.copy("wrong-dtype")
        name = "model.layers.2.self_attn.k_proj.weight"

        def fn(h):
            h[name]["dtype"] = "I32"  # same byte size as F32
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", f"'{name}'", "I32")

    def test_dtype_size_mismatch(self):
        m = self.copy("dtype-size")
        name = "model.embed_tokens.weight"

        def fn(h):
            h[name]["dtype"] = "BF16"
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", f"'{name}'", "bytes")

    def test_unknown_dtype(self):
        m = self.copy("unknown-dtype")
        name = "model.layers.0.self_attn.q_norm.weight"

        def fn(h):
            h[name]["dtype"] = "F7"
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", f"'{name}'", "F7")

    def test_missing_tensor(self):
        m = self.copy("missing-tensor")
        name = "model.layers.1.self_attn.k_norm.weight"

        def fn(h):
            h["renamed.weight"] = h.pop(name)
        self.edit_header(m, fn)
        self.expect_error(m, "model.safetensors", f"missing tensor '{name}'")

    def test_missing_mtp_tensor(self):
        m = self.copy("missing-mtp", "mimo")
        name = "model.mtp_layers.0.token_layernorm.weight"
        files = [f for f in os.listdir(m) if f.endswith(".safetensors")]
        for file in files:
            header, _ = read_safetensors(os.path.join(m, file))
            if name in header:
                self.edit_header(m, lambda h: h.__setitem__("x.weight", h.pop(name)), file)
        self.expect_error(m, f"missing tensor '{name}'")

    def test_missing_tensor_in_sharded_index(self):
        m = self.copy("sharded-missing", "sharded")
        name = "model.norm.weight"
        self.edit_config(m, lambda idx: idx["weight_map"].pop(name), "model.safetensors.index.json")
        # The shard still holds the tensor, so the index disagrees with nothing; drop it from its shard too.
        for file in sorted(os.listdir(m)):
            if file.endswith(".safetensors"):
                header, _ = read_safetensors(os.path.join(m, file))
                if name in header:
                    self.edit_header(m, lambda h: h.__setitem__("extra.weight", h.pop(name)), file)
        self.expect_error(m, "model.safetensors.index.json", f"missing tensor '{name}'")

    # --- config -------------------------------------------------------------------------
    def test_unknown_architecture(self):
        m = self.copy("unknown-arch")
        self.edit_config(m, lambda c: c.__setitem__("architectures", ["FooForCausalLM"]))
        line = self.expect_error(m, "config.json", "unsupported architecture 'FooForCausalLM'")
        for arch in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM"):
            self.assertIn(arch, line)

    def test_missing_config_keys(self):
        for key in ("hidden_size", "vocab_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size"):
            with self.subTest(key=key):
                m = self.copy("missing-" + key)
                self.edit_config(m, lambda c: c.pop(key))
                self.expect_error(m, f"config.json: missing key '{key}'")

    def test_wrongly_typed_config_key(self):
        m = self.copy("typed-key")
        self.edit_config(m, lambda c: c.__setitem__("rms_norm_eps", "tiny"))
        self.expect_error(m, "config.json", "'rms_norm_eps'")

    def test_config_disagrees_with_tensors(self):
        m = self.copy("config-shape")
        self.edit_config(m, lambda c: c.__setitem__("hidden_size", c["hidden_size"] * 2))
        self.expect_error(m, "model.safetensors", "model.embed_tokens.weight", "shape")

    # --- request ------------------------------------------------------------------------
    def test_token_out_of_range(self):
        with open(os.path.join(self.good["qwen3"], "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        self.expect_error(self.good["qwen3"], f"token id {vocab}", tokens=f"1,{vocab}")

    def test_malformed_prompt_tokens(self):
        self.expect_error(self.good["qwen3"], "--prompt-tokens", "'x'", tokens="1,x")

    # --- damaged files the loader once took (a wrong answer or an internal error later) --
    def test_end_token_ids_outside_the_vocabulary(self):
        for value in ("2", 4294967295, -3, [1, 10 ** 9]):
            m = self.copy("bad-eos")
            for file in ("config.json", "generation_config.json"):  # the second wins where it exists
                if os.path.exists(os.path.join(m, file)):
                    self.edit_config(m, lambda c: c.update(eos_token_id=value), file=file)
            self.expect_error(m, "config.json", "eos_token_id")

    def expect_cli_error(self, args, *fragments):
        p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, f"{args}: exit {p.returncode}, stderr: {p.stderr}")
        for fragment in fragments:
            self.assertIn(fragment, p.stderr)

    def test_merges_that_are_not_a_list(self):
        m = self.copy("bad-merges")
        self.edit_config(m, lambda t: t["model"].update(merges={"a b": 1}), file="tokenizer.json")
        self.expect_cli_error(["generate", "--model", m, "--prompt", "hi", "-n", "1"], "tokenizer.json", "merges")

    def test_chat_template_list_of_junk(self):
        for value in ([1, 2, "x"], [{"name": 5}], 7):
            m = self.copy("bad-template")
            self.edit_config(m, lambda t: t.update(chat_template=value), file="tokenizer_config.json")
            self.expect_cli_error(["generate", "--model", m, "--chat", "hi", "-n", "1"], "tokenizer_config.json",
                                  "chat_template")

    def write_gguf(self, name, tensors):
        """A GGUF v3 file with a qwen3 architecture key and `tensors` (name, dims) in F32."""
        def s(x):
            return struct.pack("<Q", len(x.encode())) + x.encode()
        out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1) + s("general.architecture") + struct.pack("<I", 8)
        out += s("qwen3")
        data = b""
        for tname, dims in tensors:
            n = 1
            for d in dims:
                n *= d
            out += s(tname) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            out += struct.pack("<IQ", 0, len(data))
            data += bytes(4 * n) + bytes((-4 * n) % 32)
        out += bytes((-len(out)) % 32)
        path = os.path.join(self.tmp, name + ".gguf")
        with open(path, "wb") as f:
            f.write(out + data)
        return path

    def test_gguf_without_tensors_or_with_an_empty_dimension(self):
        empty_dim = self.write_gguf("zero-dim", [("token_embd.weight", [0, 16]), ("output_norm.weight", [16])])
        self.expect_cli_error(["gguf-dump", empty_dim], "token_embd.weight", "dimension 0 is 0")
        self.expect_error(empty_dim, "token_embd.weight", "dimension 0 is 0")
        no_tensors = self.write_gguf("no-tensors", [])
        p = subprocess.run([BIN, "gguf-dump", no_tensors], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("not loadable as a model", p.stdout)
        self.expect_error(no_tensors, "no tensors")


if __name__ == "__main__":
    unittest.main(verbosity=2)
