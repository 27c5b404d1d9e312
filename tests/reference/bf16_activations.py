"""tests/reference/bf16_activations.py — the references' checkpoint reader, with the rounding
nextn applies where BF16 weights meet the CPU's bf16 dot product (the AVX3_ZEN4 target,
src/kernels/matmul.cc): every activation that multiplies a BF16 matrix is rounded to bf16
(nearest even) first; the products are then exact and only the sums differ from float64.

read_checkpoint(dir) is safetensors_reader.read_checkpoint(dir, float64); when ROUND is
true (the test harness sets it from the target nextn runs on, target_rounds()) each BF16
matrix — 2-D, or 3-D stacked experts — comes wrapped so that the references' own
`x @ W.T` and `W @ x` round x. Lookups (`W[ids]`, embeddings) and shapes pass through."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "checkpoint"))
import safetensors_reader  # noqa: E402

ROUND = False  # set by the harness: whether nextn's BF16 matmuls round their activations


def target_rounds(nextn_bin):
    """Whether `nextn_bin` runs BF16 matmuls with bf16 activations: the target it picks
    (NEXTN_SIMD, else the best of `nextn perf --simd-targets`) is AVX3_ZEN4."""
    chosen = os.environ.get("NEXTN_SIMD", "")
    if not chosen:
        p = subprocess.run([nextn_bin, "perf", "--simd-targets"], capture_output=True, text=True, check=True)
        chosen = p.stdout.split()[0]
    return chosen.upper() == "AVX3_ZEN4"


def to_bf16(x):
    """x rounded to the nearest bf16 (ties to even), as float64: float32 first (nextn's
    activations are float32), then the low 16 bits rounded away."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


class _Transposed:
    """W.T of a Bf16Matrix: `x @ W.T` rounds x."""
    __array_ufunc__ = None  # numpy defers `x @ self` to __rmatmul__

    def __init__(self, w):
        self.w = w

    def __rmatmul__(self, x):
        return to_bf16(x) @ self.w.T


class Bf16Matrix:
    """A BF16 weight as the references use it: products round the activation."""
    __array_ufunc__ = None

    def __init__(self, w):
        self.w = w
        self.shape, self.ndim, self.dtype = w.shape, w.ndim, w.dtype

    @property
    def T(self):
        return _Transposed(self.w)

    def __matmul__(self, x):  # W @ x
        return self.w @ to_bf16(x)

    def __getitem__(self, index):
        """An expert of a stack, or a slice of rows (a fused matrix's half), stays a matrix;
        rows looked up by id (embeddings) are values."""
        part = self.w[index]
        sliced = isinstance(index, slice) or (isinstance(index, tuple) and all(isinstance(i, slice) for i in index))
        return Bf16Matrix(part) if part.ndim == 2 and (self.w.ndim == 3 or sliced) else part

    def __len__(self):
        return len(self.w)

    def __array__(self, dtype=None):
        return self.w if dtype is None else self.w.astype(dtype)


def read_checkpoint(model_dir):
    W = safetensors_reader.read_checkpoint(model_dir, np.float64)
    if not ROUND:
        return W
    dtypes = safetensors_reader.tensor_dtypes(model_dir)
    return {name: Bf16Matrix(w) if dtypes.get(name) == "BF16" and is_matrix(name, w) else w
            for name, w in W.items()}


ROUTERS = ("mlp.gate.weight", "router.proj.weight")  # Qwen / GLM, Gemma 4


def is_matrix(name, w):
    """What nextn multiplies with its bf16 matmul: 2-D weights and stacks of experts; not
    the 3-D short-convolution taps, nor the routers (both run in float32)."""
    if name.endswith(ROUTERS):
        return False
    return w.ndim == 2 or (w.ndim == 3 and "experts" in name)
