// kv/hadamard.h — the randomized Walsh–Hadamard rotation used by TurboQuant.
// y = D2 · (H/√n) · D1 · x per block of n values (n a power of two), with two
// fixed ±1 sign tables drawn from a fixed seed, the same for every layer and
// head. The rotation is orthonormal, so ⟨Πq, Πk⟩ = ⟨q, k⟩; inverse() undoes
// forward() exactly (up to float rounding).
#pragma once
#include <vector>

namespace nextn {

class RandomizedHadamard {
 public:
  explicit RandomizedHadamard(int block, unsigned long long seed = 42);
  int block() const { return block_; }
  // In place on `n_blocks` consecutive blocks of block() values.
  void forward(float* x, int n_blocks = 1) const;
  void inverse(float* x, int n_blocks = 1) const;

 private:
  int block_;
  float norm_;              // 1/√block
  std::vector<float> s1_;   // applied before H in forward()
  std::vector<float> s2_;   // applied after H in forward()
};

// Unnormalized in-place fast Walsh–Hadamard transform (Sylvester order) of n values.
void fwht(float* x, int n);

}  // namespace nextn
