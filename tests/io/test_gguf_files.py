"""tests/io/test_gguf_files.py — GGUF reading against the independent Python reference
(tests/reference/ggml_quants.py):

1. dequantization of every block type: GGUF files of random blocks (every quant bit
   pattern, fp16 scales of both signs, all sub-block positions) written by the Python
   writer; `nextn gguf-dump --tensor` must give the float64 reference values to within
   float32 rounding of the format's products;
2. damaged files (truncated anywhere, bad magic, unknown or unsupported types, misaligned,
   out-of-range or overlapping data, bad shapes, duplicate names/keys): one
   `nextn: error:` line naming the file (and the tensor or key), exit 2, never a crash.
"""
import os
import random
import pathlib
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import ggml_quants as Q  # noqa: E402

BIN = os.environ.get("NEXTN_BIN", "build/nextn")
TMP = os.environ.get("NEXTN_TEST_TMP", tempfile.gettempdir())
QUANT_TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
F16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q5_0": [0], "Q6_K": [208]}  # others: d and m/dmin at 0, 2


def random_blocks(name, n_blocks, rng):
    _, _, size = Q.BLOCKS[name]
    raw = bytearray(rng.randbytes(n_blocks * size))
    for b in range(n_blocks):
        for off in F16_FIELDS.get(name, [0, 2]):
            v = rng.uniform(-0.1, 0.1)
            raw[b * size + off:b * size + off + 2] = struct.pack("<e", v)
    return bytes(raw)


def magnitude_bound(name, raw, n):
    """Per element, a bound on the size of the terms nextn multiplies and adds in float32."""
    _, elems, size = Q.BLOCKS[name]
    out = np.zeros(n)
    for b in range(n // elems):
        blk = raw[b * size:(b + 1) * size]
        if name == "Q6_K":
            m = abs(struct.unpack("<e", blk[208:210])[0]) * 128 * 32
        else:
            d = abs(struct.unpack("<e", blk[0:2])[0])
            m2 = abs(struct.unpack("<e", blk[2:4])[0]) if name not in ("Q8_0", "Q4_0", "Q5_0") else 0.0
            m = d * 128 + m2 * 64 if elems == 32 else d * 63 * 31 + m2 * 63
        out[b * elems:(b + 1) * elems] = m
    return out


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True)


class Dequantize(unittest.TestCase):
    def test_every_type_matches_the_reference(self):
        rng = random.Random(11)
        rows, cols = 3, 512
        tensors, raws = [], {}
        for name in QUANT_TYPES:
            _, elems, _ = Q.BLOCKS[name]
            raw = random_blocks(name, rows * cols // elems, rng)
            raws[name] = raw
            tensors.append((f"t.{name}", [cols, rows], name, raw))
        f32 = np.linspace(-3, 3, 64, dtype=np.float32)
        tensors.append(("t.F32", [64], "F32", f32.tobytes()))
        path = os.path.join(TMP, "gguf-dequant.gguf")
        Q.write_gguf(path, [("general.architecture", 8, "test")], tensors)
        listing = run(["gguf-dump", path])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        for name in QUANT_TYPES:
            self.assertIn(f"t.{name}", listing.stdout)
            out = os.path.join(TMP, f"gguf-dequant-{name}.f32")
            r = run(["gguf-dump", path, "--tensor", f"t.{name}", "--out", out])
            self.assertEqual(r.returncode, 0, r.stderr)
            got = np.fromfile(out, dtype="<f4").astype(np.float64)
            want = Q.dequantize(name, raws[name], rows * cols)
            self.assertEqual(got.shape, want.shape, name)
            # nextn computes d·sc·q − dmin·m in float32: each of ≤ 3 roundings ≤ 2^-24 of a term.
            tol = 3 * 2.0 ** -24 * magnitude_bound(name, raws[name], rows * cols) + 1e-30
            bad = np.abs(got - want) > tol
            self.assertFalse(bad.any(), f"{name}: first mismatch at {np.argmax(bad)}: "
                                        f"{got[np.argmax(bad)]} vs {want[np.argmax(bad)]}")
            self.assertTrue((want < 0).any() and (want > 0).any(), name)  # both signs exercised
        out = os.path.join(TMP, "gguf-dequant-F32.f32")
        self.assertEqual(run(["gguf-dump", path, "--tensor", "t.F32", "--out", out]).returncode, 0)
        np.testing.assert_array_equal(np.fromfile(out, dtype="<f4"), f32)


def good_file(path, extra_tensors=(), metadata=None):
    rng = random.Random(5)
    tensors = [("a.weight", [64, 2], "Q8_0", random_blocks("Q8_0", 4, rng)),
               ("b.weight", [256], "F32", bytes(1024))] + list(extra_tensors)
    Q.write_gguf(path, metadata or [("general.architecture", 8, "test"), ("x.count", 4, 7)], tensors)
    return pathlib.Path(path).read_bytes()


class Damaged(unittest.TestCase):
    def check_error(self, data, *needles, name="damaged.gguf"):
        path = os.path.join(TMP, name)
        pathlib.Path(path).write_bytes(data)
        r = run(["gguf-dump", path])
        self.assertEqual(r.returncode, 2, f"stdout={r.stdout!r} stderr={r.stderr!r}")
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("nextn: error: "), r.stderr)
        self.assertIn(path, lines[0])
        for n in needles:
            self.assertIn(n, lines[0])

    def test_good_file_reads(self):
        path = os.path.join(TMP, "good.gguf")
        good_file(path)
        r = run(["gguf-dump", path])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("a.weight", r.stdout)

    def test_truncated_anywhere(self):
        data = good_file(os.path.join(TMP, "good.gguf"))
        # Every cut inside the header and tensor infos, and a few inside the data.
        _, _, _, data_start, _ = Q.read_gguf(os.path.join(TMP, "good.gguf"))
        cuts = list(range(0, data_start, 3)) + [data_start + 1, len(data) - 1]
        for cut in cuts:
            with self.subTest(cut=cut):
                self.check_error(data[:cut])

    def test_bad_magic_and_version(self):
        data = good_file(os.path.join(TMP, "good.gguf"))
        self.check_error(b"GGUX" + data[4:], "magic")
        self.check_error(data[:4] + struct.pack("<I", 9) + data[8:], "version 9")

    def patch_tensor(self, tensor_index, dims=None, type_id=None, offset=None):
        path = os.path.join(TMP, "good.gguf")
        data = bytearray(good_file(path))
        # Walk the file with the reference reader to find the info fields.
        r = Q._Reader(bytes(data))
        r.pos = 24
        _, md, _, _, _ = Q.read_gguf(path)
        for _ in md:
            r.string()
            r.value(r.take("<I"))
        for i in range(tensor_index + 1):
            r.string()
            n_dims = r.take("<I")
            dims_pos = r.pos
            r.pos += 8 * n_dims
            type_pos = r.pos
            r.pos += 12
        if dims is not None:
            for k, d in enumerate(dims):
                data[dims_pos + 8 * k:dims_pos + 8 * k + 8] = struct.pack("<Q", d)
        if type_id is not None:
            data[type_pos:type_pos + 4] = struct.pack("<I", type_id)
        if offset is not None:
            data[type_pos + 4:type_pos + 12] = struct.pack("<Q", offset)
        return bytes(data)

    def test_unknown_and_unsupported_types_name_the_tensor(self):
        self.check_error(self.patch_tensor(0, type_id=99), "a.weight", "type 99")
        self.check_error(self.patch_tensor(0, type_id=10), "a.weight", "Q2_K")
        self.check_error(self.patch_tensor(0, type_id=23), "a.weight", "IQ4_XS")

    def test_offsets_and_sizes(self):
        self.check_error(self.patch_tensor(0, offset=4), "a.weight", "alignment")
        self.check_error(self.patch_tensor(1, offset=0), "overlap")
        self.check_error(self.patch_tensor(1, offset=1 << 20), "b.weight", "past the end")
        self.check_error(self.patch_tensor(0, dims=[48, 2]), "a.weight", "multiple")
        self.check_error(self.patch_tensor(1, dims=[1 << 20]), "b.weight", "past the end")

    def test_duplicates(self):
        path = os.path.join(TMP, "dup.gguf")
        rng = random.Random(1)
        t = ("a.weight", [32], "Q8_0", random_blocks("Q8_0", 1, rng))
        Q.write_gguf(path, [("general.architecture", 8, "test")], [t, t])
        self.check_error(pathlib.Path(path).read_bytes(), "a.weight", "twice", name="dup1.gguf")
        Q.write_gguf(path, [("k", 4, 1), ("k", 4, 2)], [t])
        self.check_error(pathlib.Path(path).read_bytes(), "'k'", "twice", name="dup2.gguf")

    def test_invalid_utf8_in_a_value_named_in_the_error(self):
        # Found by tests/fuzz (gguf_fuzz): the message quoting the bad value used to throw.
        path = os.path.join(TMP, "utf8.gguf")
        good_file(path, metadata=[("general.architecture", 8, "test"), ("general.alignment", 8, b"\xff\xfe32")])
        self.check_error(pathlib.Path(path).read_bytes(), "general.alignment", name="utf8.gguf")

    def test_huge_counts_do_not_allocate(self):
        data = good_file(os.path.join(TMP, "good.gguf"))
        self.check_error(data[:8] + struct.pack("<QQ", 1 << 62, 1 << 62) + data[24:], "corrupt")

    def test_model_load_names_missing_key(self):
        path = os.path.join(TMP, "nomodel.gguf")
        good_file(path)
        r = run(["generate", "--model", path, "--prompt-tokens", "1", "-n", "1"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertTrue(r.stderr.startswith("nextn: error: "), r.stderr)
        self.assertIn("architecture 'test' is not supported", r.stderr)


if __name__ == "__main__":
    unittest.main()
