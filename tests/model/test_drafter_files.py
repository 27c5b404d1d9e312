#!/usr/bin/python3
"""tests/model/test_drafter_files.py — the drafter files users bring, under
--mtp-assistant-model:
  - MTP-only safetensors directories of every family with MTP layers (MiMo
    model.mtp_layers.*, DeepSeek nextn model.layers.{L}.* on a Qwen3 trunk, GLM-4.5 nextn,
    Qwen3.5 mtp.*): tools/make_checkpoint.py --mtp-only beside the trunk-only --mtp none
    of the same seed (identical weights);
  - llama.cpp's split MTP GGUF (its converter's --mtp / --no-mtp): the test splits a
    GGUF from `nextn quantize` itself, as llama.cpp's converter lays the two files out
    (the trunk: blk.0..L-1, block_count L, no nextn_predict_layers; the MTP file: the
    blk.{L}.* block, token_embd, output_norm, output, block_count L + 1,
    nextn_predict_layers 1), for qwen35 and glm4moe; `nextn quantize --no-mtp` and
    `--mtp-only` write the same two files (tensors and metadata);
  - the trained tiny models (MiMo, Qwen3.5) split both ways, where drafts are accepted;
    the MiMo head as an F32 MTP-only GGUF beside its safetensors trunk drafts as the
    safetensors head does;
  - llama.cpp's gemma4-assistant GGUF, written here from the safetensors assistant as
    llama.cpp's converter does (names, metadata keys, no masked_embedding; F32 tensors).
Each drafts with exactly the acceptance of the same weights in their reference form (the
full checkpoint's own --mtp head, or the safetensors assistant), greedy, depth 2, fixed
prompt, and the output equals plain greedy decoding. Damaged drafter files (vocabulary or
hidden size other than the target's, a missing tensor, a file with no MTP layers) exit 2
naming the file and the mismatch, from `generate` and from `serve` at start."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
sys.path.insert(0, os.path.join(SRC, "tools", "checkpoint"))
import bf16_activations  # noqa: E402
import ggml_quants as Q  # noqa: E402
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402

BIN = os.environ.get("NEXTN_BIN")
PY = "/usr/bin/python3"
GEN = os.path.join(SRC, "tools", "make_checkpoint.py")
TMP_ROOT = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
PROMPT = ["--prompt-tokens", "1,37,205,12,99,250,7,64,3,180,41,9,17"]
N = 24


def make(out, *args):
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([PY, GEN, "--quiet", "--out", out, *args], check=True)
    return out


def generate(model, *extra, env=None):
    """(first output line: the ids, the acceptance 'a/t' or None) of a greedy run."""
    cmd = [BIN, "generate", "--model", model, *PROMPT, "-n", str(N), "--ids", "--ignore-eos", "--threads", "2",
           *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    m = re.search(r"draft acceptance (\d+/\d+)", p.stdout)
    return p.stdout.splitlines()[0], m.group(1) if m else None


def gguf_parts(path):
    """(metadata dict, [(name, dims, type, raw bytes)]) of a GGUF file."""
    _, md, tensors, start, data = Q.read_gguf(path)
    return md, [(t["name"], t["dims"], t["type"], data[start + t["offset"]:start + t["offset"] + t["nbytes"]])
                for t in tensors]


def write_gguf(path, md, tensors):
    from test_gguf_models import metadata_items
    Q.write_gguf(path, metadata_items(md), tensors)
    return path


def split_gguf(full, trunk_out, mtp_out):
    """llama.cpp's two files of one model with an MTP block (convert_hf_to_gguf.py --no-mtp
    and --mtp): the trunk without the block; the block with copies of the embedding, final
    norm and output head, block_count counting it."""
    md, tensors = gguf_parts(full)
    arch = md["general.architecture"]
    n_mtp = md[f"{arch}.nextn_predict_layers"]
    L = md[f"{arch}.block_count"] - n_mtp

    def block(name):
        return int(name.split(".")[1]) if name.startswith("blk.") else -1

    trunk_md = {k: v for k, v in md.items() if k != f"{arch}.nextn_predict_layers"}
    trunk_md[f"{arch}.block_count"] = L
    write_gguf(trunk_out, trunk_md, [t for t in tensors if block(t[0]) < L])
    keep = ("token_embd.weight", "output_norm.weight", "output.weight")
    write_gguf(mtp_out, md, [t for t in tensors if block(t[0]) >= L or t[0] in keep])


class DrafterFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="drafter-files-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def trio(self, name, *args):
        """(full, trunk-only, MTP-only) checkpoints of one seed."""
        full = self.path(f"{name}-full")
        if not os.path.exists(full):
            make(full, *args)
            make(self.path(f"{name}-trunk"), *args, "--mtp", "none")
            make(self.path(f"{name}-mtp"), *args, "--mtp-only")
        return full, self.path(f"{name}-trunk"), self.path(f"{name}-mtp")

    def draft_logits(self, model, name, head_args, env=None):
        """The first draft step's logits over the prompt rows (MTP heads) or 3 assistant steps."""
        out = self.path(f"dl-{name}")
        gemma = "gemma4" in name
        cmd = [BIN, "debug-logits", "--model", model, "--prompt-tokens", PROMPT[1], "--threads", "2", "--out", out,
               *head_args, *(["--assistant-steps", "3"] if gemma else [])]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return np.load(out + (".assistant.npy" if gemma else ".mtp.npy"))

    def check_same_drafts(self, full, trunk, drafter, head_args=("--mtp",), rtol=0.0, env=None):
        """The drafter file drafts what the reference form drafts: the same draft logits
        (bit for bit where the arithmetic is the same; within rtol where the file orders a
        sum otherwise), the same ids and acceptance, and the ids are plain greedy's.
        `env`: the environment of every run (a SIMD target both forms share)."""
        tag = os.path.basename(drafter)
        got = self.draft_logits(trunk, tag, ["--mtp-assistant-model", drafter], env)
        want = self.draft_logits(full, tag + "-ref", list(head_args), env)
        if rtol:
            self.assertLessEqual(float(np.max(np.abs(got - want)) / np.max(np.abs(want))), rtol)
        else:
            np.testing.assert_array_equal(got, want)
        ref_ids, ref_acc = generate(full, *head_args, "--num-mtp-tokens", "2", env=env)
        ids, acc = generate(trunk, "--mtp-assistant-model", drafter, "--num-mtp-tokens", "2", env=env)
        plain, _ = generate(trunk, env=env)
        self.assertIsNotNone(acc)
        self.assertEqual(ids, plain)
        self.assertEqual(ref_ids, plain)
        self.assertEqual(acc, ref_acc, "acceptance of the split drafter vs the same weights in one checkpoint")
        print(f"\n  {os.path.basename(drafter)}: acceptance {acc} (the same weights in one file: {ref_acc})")
        self.assertGreater(int(acc.split("/")[1]), 0)  # it drafted

    def test_split_safetensors_mimo(self):
        self.check_same_drafts(*self.trio("mimo", "--arch", "mimo", "--seed", "3"))

    def test_split_safetensors_deepseek_nextn(self):
        self.check_same_drafts(*self.trio("deepseek", "--arch", "qwen3", "--mtp", "deepseek", "--seed", "4"))

    def test_split_safetensors_glm4_moe_nextn(self):
        self.check_same_drafts(*self.trio("glm", "--arch", "glm4_moe", "--seed", "5"))

    def test_split_safetensors_qwen3_5(self):
        self.check_same_drafts(*self.trio("qwen35", "--arch", "qwen3_5", "--seed", "6"))

    def check_split_gguf(self, name, *args):
        full, _, _ = self.trio(name, *args)
        full_gguf = self.path(f"{name}-full.gguf")
        subprocess.run([BIN, "quantize", full, "--type", "q8_0", "--out", full_gguf, "--no-progress"], check=True,
                       capture_output=True)
        trunk, mtp = self.path(f"{name}.gguf"), self.path(f"mtp-{name}.gguf")
        split_gguf(full_gguf, trunk, mtp)
        md, _ = gguf_parts(trunk)
        self.assertNotIn(f"{md['general.architecture']}.nextn_predict_layers", md)
        self.check_same_drafts(full_gguf, trunk, mtp)

    def test_split_gguf_qwen35(self):
        self.check_split_gguf("qwen35", "--arch", "qwen3_5", "--seed", "6")

    def test_split_gguf_glm4moe(self):
        self.check_split_gguf("glm", "--arch", "glm4_moe", "--seed", "5")

    # --- trained models (random heads are never accepted): the acceptance compared is real ---

    def split_safetensors(self, src, name, is_mtp, mtp_key):
        """A checkpoint with its MTP head as the two directories of the split form."""
        trunk, mtp = self.path(f"{name}-trunk"), self.path(f"{name}-mtp")
        dtypes = safetensors_reader.tensor_dtypes(src)
        W = safetensors_reader.read_checkpoint(src, dtype=np.float32)
        keep = ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight")
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        for out, wanted, with_key in ((trunk, lambda k: not is_mtp(k), False),
                                      (mtp, lambda k: is_mtp(k) or k in keep, True)):
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(src, out, ignore=shutil.ignore_patterns("training", "*.md"))
            specs = [safetensors_writer.TensorSpec(k, np.shape(v), dtypes[k], lambda v=v: iter([v]))
                     for k, v in sorted(W.items()) if wanted(k)]
            safetensors_writer.write_file(os.path.join(out, "model.safetensors"), specs)
            c = dict(cfg)
            if not with_key:
                c.pop(mtp_key)
            with open(os.path.join(out, "config.json"), "w") as f:
                json.dump(c, f)
        return trunk, mtp

    def check_trained(self, model, name, is_mtp, mtp_key):
        src = os.path.join(SRC, "models", model)
        trunk, mtp = self.split_safetensors(src, name, is_mtp, mtp_key)
        self.check_same_drafts(src, trunk, mtp)
        _, acc = generate(trunk, "--mtp-assistant-model", mtp, "--num-mtp-tokens", "2")
        self.assertGreater(int(acc.split("/")[0]), 0, "the trained head's drafts are accepted")
        return src

    def test_trained_mimo_split(self):
        self.check_trained("nextn-tiny", "tiny", lambda k: k.startswith("model.mtp_layers."),
                           "num_nextn_predict_layers")

    def test_trained_mimo_mtp_gguf_f32_beside_safetensors_trunk(self):
        """The MTP-only GGUF of the same weights (F32, as llama.cpp's converter names them:
        MiMo's input_proj([h; e]) as eh_proj([e; h]), its norms as enorm / hnorm /
        shared_head_norm) beside the safetensors trunk drafts as the safetensors head does."""
        src = os.path.join(SRC, "models", "nextn-tiny")
        trunk, _ = self.split_safetensors(src, "tiny", lambda k: k.startswith("model.mtp_layers."),
                                          "num_nextn_predict_layers")
        with open(os.path.join(src, "config.json")) as f:
            c = json.load(f)
        W = safetensors_reader.read_checkpoint(src, dtype=np.float32)
        L, H = c["num_hidden_layers"], c["hidden_size"]
        a = "qwen2."
        md = {"general.architecture": "qwen2", a + "block_count": L + 1, a + "nextn_predict_layers": 1,
              a + "embedding_length": H, a + "feed_forward_length": c["intermediate_size"],
              a + "attention.head_count": c["num_attention_heads"],
              a + "attention.head_count_kv": c["num_key_value_heads"], a + "attention.key_length": c["head_dim"],
              a + "attention.value_length": c["head_dim"],
              a + "attention.layer_norm_rms_epsilon": float(c["rms_norm_eps"]),
              a + "rope.freq_base": float(c["rope_theta"]), a + "context_length": c["max_position_embeddings"]}
        head = {"token_layernorm.weight": "nextn.enorm.weight", "hidden_layernorm.weight": "nextn.hnorm.weight",
                "final_layernorm.weight": "nextn.shared_head_norm.weight", "input_proj.weight": "nextn.eh_proj.weight"}
        block = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
                 "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down"}
        tensors = []
        for hf, w in sorted(W.items()):
            if hf == "model.embed_tokens.weight":
                g = "token_embd.weight"
            elif hf == "model.norm.weight":
                g = "output_norm.weight"
            elif hf.startswith("model.mtp_layers.0."):
                rest = hf[len("model.mtp_layers.0."):]
                if rest == "input_proj.weight":
                    w = np.concatenate([w[:, H:], w[:, :H]], axis=1)  # [h; e] columns → [e; h]
                stem, kind = rest.rsplit(".", 1)
                g = f"blk.{L}." + (head[rest] if rest in head else f"{block[stem]}.{kind}")
            else:
                continue
            w = np.ascontiguousarray(w, dtype=np.float32)
            tensors.append((g, list(reversed(w.shape)), "F32", w.tobytes()))
        gguf = write_gguf(self.path("mtp-tiny-f32.gguf"), md, tensors)
        # Same weights, the concatenation's halves in the other order: equal up to the
        # order of one matmul's sums. The file's weights are F32, the reference's BF16: on
        # AVX3_ZEN4 BF16 weights meet activations rounded to bf16 (relative error up to
        # 2^-9 each, kernels/matmul.cc), F32 ones do not, so both run on the same target
        # without that rounding (AVX3_DL, the same code less the bf16 dot product).
        env = None
        if bf16_activations.target_rounds(BIN):
            env = {**os.environ, "NEXTN_SIMD": "AVX3_DL"}
        self.check_same_drafts(src, trunk, gguf, rtol=1e-5, env=env)

    def test_trained_qwen35_split_safetensors_and_gguf(self):
        src = self.check_trained("nextn-tiny-chat", "tiny-chat", lambda k: k.startswith("mtp."),
                                 "mtp_num_hidden_layers")
        full_gguf = self.path("tiny-chat-full.gguf")
        subprocess.run([BIN, "quantize", src, "--type", "q8_0", "--out", full_gguf, "--no-progress"], check=True,
                       capture_output=True)
        trunk, mtp = self.path("tiny-chat.gguf"), self.path("mtp-tiny-chat.gguf")
        split_gguf(full_gguf, trunk, mtp)
        self.check_same_drafts(full_gguf, trunk, mtp)
        _, acc = generate(trunk, "--mtp-assistant-model", mtp, "--num-mtp-tokens", "2")
        self.assertGreater(int(acc.split("/")[0]), 0)
        # `nextn quantize --no-mtp` / `--mtp-only` write the same two files.
        for flag, split in (("--no-mtp", trunk), ("--mtp-only", mtp)):
            out = self.path(f"tiny-chat{flag}.gguf")
            subprocess.run([BIN, "quantize", src, "--type", "q8_0", "--out", out, "--no-progress", flag], check=True,
                           capture_output=True)
            got_md, got = gguf_parts(out)
            want_md, want = gguf_parts(split)
            self.assertEqual(sorted((n, list(d), t, bytes(r)) for n, d, t, r in got),
                             sorted((n, list(d), t, bytes(r)) for n, d, t, r in want), flag)
            self.assertEqual({k: v for k, v in got_md.items() if k != "general.name"},
                             {k: v for k, v in want_md.items() if k != "general.name"}, flag)

    # --- the Gemma 4 assistant as llama.cpp's gemma4-assistant GGUF ---

    def gemma4_pair(self):
        target, assistant = self.path("g4-target"), self.path("g4-assistant")
        if not os.path.exists(assistant):
            make(target, "--arch", "gemma4", "--seed", "7")
            make(assistant, "--assistant-of", target, "--no-centroids", "--seed", "8")
        return target, assistant

    def assistant_gguf(self, assistant, out, edit=None):
        """The assistant as llama.cpp's converter writes it (Gemma4AssistantModel)."""
        with open(os.path.join(assistant, "config.json")) as f:
            cfg = json.load(f)
        t = cfg["text_config"]
        W = safetensors_reader.read_checkpoint(assistant)
        if edit:
            cfg, t, W = edit(cfg, t, W)
        n, a = t["num_hidden_layers"], "gemma4-assistant."
        sliding = [k == "sliding_attention" for k in t["layer_types"]]
        full_kv = t["num_global_key_value_heads"] if t.get("attention_k_eq_v") else t["num_key_value_heads"]
        md = {"general.architecture": "gemma4-assistant", a + "block_count": n,
              a + "embedding_length": t["hidden_size"], a + "embedding_length_out": cfg["backbone_hidden_size"],
              a + "nextn_predict_layers": n, a + "feed_forward_length": t["intermediate_size"],
              a + "attention.head_count": t["num_attention_heads"],
              a + "attention.head_count_kv": [t["num_key_value_heads"] if s else full_kv for s in sliding],
              a + "attention.key_length": t["global_head_dim"], a + "attention.value_length": t["global_head_dim"],
              a + "attention.key_length_swa": t["head_dim"], a + "attention.value_length_swa": t["head_dim"],
              a + "attention.sliding_window": t["sliding_window"], a + "attention.sliding_window_pattern": sliding,
              a + "attention.layer_norm_rms_epsilon": float(t["rms_norm_eps"]),
              a + "attention.shared_kv_layers": n, a + "rope.dimension_count": t["global_head_dim"],
              a + "rope.dimension_count_swa": t["head_dim"]}
        block = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.q_norm": "attn_q_norm",
                 "self_attn.o_proj": "attn_output", "post_attention_layernorm": "post_attention_norm",
                 "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
        names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                 "pre_projection.weight": "nextn.pre_projection.weight",
                 "post_projection.weight": "nextn.post_projection.weight"}
        tensors = []
        for hf, w in sorted(W.items()):
            if hf.startswith("model.layers."):
                _, _, i, rest = hf.split(".", 3)
                g = f"blk.{i}.layer_output_scale.weight" if rest == "layer_scalar" else \
                    f"blk.{i}.{block[rest.rsplit('.', 1)[0]]}.weight"
            else:
                g = names[hf]
            w = np.asarray(w, dtype=np.float32)
            tensors.append((g, list(reversed(w.shape)) or [1], "F32", w.tobytes()))
        return write_gguf(out, md, tensors)

    def test_gemma4_assistant_gguf(self):
        target, assistant = self.gemma4_pair()
        gguf = self.assistant_gguf(assistant, self.path("gemma4-assistant.gguf"))
        self.check_same_drafts(target, target, gguf, head_args=("--mtp-assistant-model", assistant))

    # --- damaged drafter files ---

    def refused(self, target, drafter, *expect):
        for cmd in (["generate", "--model", target, "--prompt", "hi", "-n", "2"],
                    ["serve", "--model", target, "--port", "0"]):
            p = subprocess.run([BIN, *cmd, "--mtp-assistant-model", drafter], capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(p.returncode, 2, f"{cmd[0]}: {p.stdout}{p.stderr}")
            for text in expect:
                self.assertIn(text, p.stderr, cmd[0])

    def test_split_drafter_of_another_vocabulary_is_refused(self):
        _, trunk, _ = self.trio("qwen35", "--arch", "qwen3_5", "--seed", "6")
        other = make(self.path("qwen35-mtp-vocab"), "--arch", "qwen3_5", "--seed", "6", "--mtp-only", "--vocab", "320")
        self.refused(trunk, other, other, "vocab_size 320", "target model's vocab_size")

    def test_split_drafter_of_another_width_is_refused(self):
        _, trunk, mtp = self.trio("glm", "--arch", "glm4_moe", "--seed", "5")
        other = self.path("glm-mtp-hidden")
        shutil.copytree(mtp, other, dirs_exist_ok=True)
        with open(os.path.join(other, "config.json")) as f:
            cfg = json.load(f)
        cfg["hidden_size"] = 2 * cfg["hidden_size"]
        with open(os.path.join(other, "config.json"), "w") as f:
            json.dump(cfg, f)
        self.refused(trunk, other, other, f"hidden_size {cfg['hidden_size']}", "target model's hidden_size")

    def test_split_drafter_missing_a_tensor_is_refused(self):
        _, trunk, mtp = self.trio("qwen35", "--arch", "qwen3_5", "--seed", "6")
        other = self.path("qwen35-mtp-missing")
        shutil.copytree(mtp, other, dirs_exist_ok=True)
        W = safetensors_reader.read_checkpoint(mtp)
        gone = "mtp.layers.0.self_attn.q_proj.weight"
        specs = [safetensors_writer.TensorSpec(k, np.shape(v), "F32", lambda v=v: iter([np.asarray(v, np.float32)]))
                 for k, v in sorted(W.items()) if k != gone]
        safetensors_writer.write_file(os.path.join(other, "model.safetensors"), specs)
        self.refused(trunk, other, other, gone)

    def test_trunk_without_mtp_layers_is_refused_as_drafter(self):
        _, trunk, _ = self.trio("mimo", "--arch", "mimo", "--seed", "3")
        self.refused(trunk, trunk, trunk, "holds no MTP layers")

    def test_gemma4_assistant_gguf_of_another_vocabulary_is_refused(self):
        target, assistant = self.gemma4_pair()

        def smaller_vocab(cfg, t, W):
            W = dict(W)
            W["model.embed_tokens.weight"] = np.asarray(W["model.embed_tokens.weight"])[:256]
            return cfg, t, W
        gguf = self.assistant_gguf(assistant, self.path("gemma4-assistant-vocab.gguf"), smaller_vocab)
        self.refused(target, gguf, gguf, "vocab_size 256")

    def test_gemma4_assistant_gguf_of_another_width_is_refused(self):
        target, assistant = self.gemma4_pair()

        def wider(cfg, t, W):
            return dict(cfg, backbone_hidden_size=2 * cfg["backbone_hidden_size"]), t, W
        gguf = self.assistant_gguf(assistant, self.path("gemma4-assistant-hidden.gguf"), wider)
        self.refused(target, gguf, gguf, "backbone_hidden_size")


if __name__ == "__main__":
    unittest.main(verbosity=2)
