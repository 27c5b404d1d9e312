// kv/hadamard.cc — randomized Walsh–Hadamard rotation (see hadamard.h).
#include "kv/hadamard.h"

#include <cmath>

#include "util/error.h"

namespace nextn {

namespace {

// splitmix64: a tiny fixed PRNG so the sign tables never depend on the platform.
unsigned long long splitmix64(unsigned long long& state) {
  unsigned long long z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

void fwht(float* x, int n) {
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

RandomizedHadamard::RandomizedHadamard(int block, unsigned long long seed) : block_(block) {
  if (block < 2 || (block & (block - 1)) != 0)
    fail(ErrorKind::kInternal, "hadamard: block size {} is not a power of two", block);
  norm_ = 1.0f / std::sqrt(static_cast<float>(block));
  s1_.resize(block);
  s2_.resize(block);
  unsigned long long state = seed;
  for (int i = 0; i < block; ++i) s1_[i] = (splitmix64(state) >> 63) ? -1.0f : 1.0f;
  for (int i = 0; i < block; ++i) s2_[i] = (splitmix64(state) >> 63) ? -1.0f : 1.0f;
}

void RandomizedHadamard::forward(float* x, int n_blocks) const {
  for (int b = 0; b < n_blocks; ++b, x += block_) {
    for (int i = 0; i < block_; ++i) x[i] *= s1_[i];
    fwht(x, block_);
    for (int i = 0; i < block_; ++i) x[i] *= s2_[i] * norm_;
  }
}

void RandomizedHadamard::inverse(float* x, int n_blocks) const {
  for (int b = 0; b < n_blocks; ++b, x += block_) {
    for (int i = 0; i < block_; ++i) x[i] *= s2_[i];
    fwht(x, block_);
    for (int i = 0; i < block_; ++i) x[i] *= s1_[i] * norm_;
  }
}

}  // namespace nextn
