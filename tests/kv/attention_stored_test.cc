// tests/kv/attention_stored_test.cc — decode attention reads F16/BF16 KV rows in place
// (attend_block_stored, and FullPrecisionCache's one-query path built on it): its output
// must be bit-identical to converting the rows to float first (kv_load_f32, then
// attend_block), since decode is meant to give the same bits on every path. Checked over
// key counts, head dims, GQA groups and a sliding window, on the SIMD target the binary
// runs on (NEXTN_SIMD=AVX2, SSE4, ... selects the others).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kv/attention_simd.h"
#include "kv/full_precision_cache.h"
#include "kv_test_util.h"

namespace nextn {
namespace {

constexpr int kBlock = FullPrecisionCache::kBlockTokens;

std::vector<uint32_t> bits(const float* x, size_t n) {
  std::vector<uint32_t> b(n);
  std::memcpy(b.data(), x, n * sizeof(float));
  return b;
}

struct Case {
  KvType type;
  int count;     // keys
  int head_dim;
  int group;     // query heads per KV head
  int window;    // sliding window of the cache test (0: none)
};

std::string name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(kv_type_name(c.type)) + "_n" + std::to_string(c.count) + "_d" + std::to_string(c.head_dim) +
         "_g" + std::to_string(c.group) + (c.window ? "_w" + std::to_string(c.window) : "");
}

DType dtype_of(KvType type) { return type == KvType::kF16 ? DType::kF16 : DType::kBF16; }

// n random floats as the cache stores them (F16 or BF16 bits).
std::vector<uint16_t> stored_rows(DType dtype, size_t n, unsigned seed) {
  const auto f = testing_kv::random_floats(n, seed);
  std::vector<uint16_t> out(n);
  kv_store(dtype, f.data(), n, out.data());
  return out;
}

class StoredAttentionTest : public ::testing::TestWithParam<Case> {};

// The kernel on its own: `count` stored rows walked in blocks of 64 (as the cache does),
// each query of the group folded in turn, in place against converted.
TEST_P(StoredAttentionTest, KernelMatchesConvertedRows) {
  const Case c = GetParam();
  const int D = c.head_dim;
  const DType dtype = dtype_of(c.type);
  const auto k = stored_rows(dtype, size_t(c.count) * D, 1), v = stored_rows(dtype, size_t(c.count) * D, 2);
  const auto q = testing_kv::random_floats(size_t(c.group) * D, 3);
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<float> kb(size_t(kBlock) * D), vb(size_t(kBlock) * D), scores(kBlock);
  for (int j = 0; j < c.group; ++j) {
    float m0 = -std::numeric_limits<float>::infinity(), l0 = 0, m1 = m0, l1 = 0;
    std::vector<float> acc0(D, 0.0f), acc1(D, 0.0f);
    for (int t0 = 0; t0 < c.count; t0 += kBlock) {
      const int n = std::min(kBlock, c.count - t0);
      kv_load_f32(dtype, k.data() + size_t(t0) * D, size_t(n) * D, kb.data());
      kv_load_f32(dtype, v.data() + size_t(t0) * D, size_t(n) * D, vb.data());
      attend_block(q.data() + size_t(j) * D, kb.data(), vb.data(), n, D, scale, scores.data(), &m0, &l0, acc0.data());
      const int next = std::min(kBlock, c.count - t0 - kBlock);
      attend_block_stored(dtype, q.data() + size_t(j) * D, 1, k.data() + size_t(t0) * D, v.data() + size_t(t0) * D, n, D,
                          scale, scores.data(), &m1, &l1, acc1.data(), next > 0 ? k.data() + size_t(t0 + kBlock) * D : nullptr,
                          next > 0 ? v.data() + size_t(t0 + kBlock) * D : nullptr, std::max(next, 0));
    }
    EXPECT_EQ(bits(&m0, 1), bits(&m1, 1)) << "query " << j;
    EXPECT_EQ(bits(&l0, 1), bits(&l1, 1)) << "query " << j;
    EXPECT_EQ(bits(acc0.data(), D), bits(acc1.data(), D)) << "query " << j;
  }
}

// The whole group in one call (each key and value row loaded once for its queries)
// against each query converted and folded alone.
TEST_P(StoredAttentionTest, GroupKernelMatchesEachQueryAlone) {
  const Case c = GetParam();
  const int D = c.head_dim, G = c.group;
  const DType dtype = dtype_of(c.type);
  const auto k = stored_rows(dtype, size_t(c.count) * D, 7), v = stored_rows(dtype, size_t(c.count) * D, 8);
  const auto q = testing_kv::random_floats(size_t(G) * D, 9);
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<float> kb(size_t(kBlock) * D), vb(size_t(kBlock) * D), scores(size_t(G) * kBlock);
  std::vector<float> m0(G, -std::numeric_limits<float>::infinity()), l0(G, 0.0f), m1 = m0, l1 = l0;
  std::vector<float> acc0(size_t(G) * D, 0.0f), acc1 = acc0;
  for (int t0 = 0; t0 < c.count; t0 += kBlock) {
    const int n = std::min(kBlock, c.count - t0);
    kv_load_f32(dtype, k.data() + size_t(t0) * D, size_t(n) * D, kb.data());
    kv_load_f32(dtype, v.data() + size_t(t0) * D, size_t(n) * D, vb.data());
    for (int j = 0; j < G; ++j)
      attend_block(q.data() + size_t(j) * D, kb.data(), vb.data(), n, D, scale, scores.data(), &m0[j], &l0[j],
                   acc0.data() + size_t(j) * D);
    attend_block_stored(dtype, q.data(), G, k.data() + size_t(t0) * D, v.data() + size_t(t0) * D, n, D, scale,
                        scores.data(), m1.data(), l1.data(), acc1.data(), nullptr, nullptr, 0);
  }
  EXPECT_EQ(bits(m0.data(), G), bits(m1.data(), G));
  EXPECT_EQ(bits(l0.data(), G), bits(l1.data(), G));
  EXPECT_EQ(bits(acc0.data(), acc0.size()), bits(acc1.data(), acc1.size()));
}

// The cache's decode (one query row per head at the last position) against the old form
// of that path rebuilt from the stored rows: each block converted, then attend_block.
TEST_P(StoredAttentionTest, CacheDecodeMatchesConvertedRows) {
  const Case c = GetParam();
  const int D = c.head_dim, KV = 2, H = KV * c.group;
  KvShape shape{1, H, KV, D, c.count + 1};
  if (c.window > 0) {
    shape.window = c.window;
    shape.ring_tokens = c.window + c.count;  // room for the whole append below
  }
  FullPrecisionCache cache(shape, c.type);
  const auto k = testing_kv::random_floats(size_t(c.count) * KV * D, 4);
  const auto v = testing_kv::random_floats(size_t(c.count) * KV * D, 5);
  cache.append(0, 0, c.count, k.data(), v.data());
  const auto q = testing_kv::random_floats(size_t(H) * D, 6);
  const float scale = 1.0f / std::sqrt(float(D));
  const int pos = c.count - 1;  // the last row, seeing every key (or its window)
  std::vector<float> out(size_t(H) * D, -7.0f);
  cache.attend(0, pos, 1, q.data(), out.data(), scale);

  const DType dtype = dtype_of(c.type);
  const int first_key = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
  std::vector<float> expected(out.size());
  std::vector<float> kb(size_t(kBlock) * D), vb(size_t(kBlock) * D), scores(kBlock);
  for (int h = 0; h < H; ++h) {
    const int kvh = h / c.group;
    float m = -std::numeric_limits<float>::infinity(), l = 0;
    std::vector<float> acc(D, 0.0f);
    for (int t0 = first_key / kBlock * kBlock; t0 < c.count; t0 += kBlock) {
      const int n = std::min(kBlock, c.count - t0);
      const int skip = std::max(0, first_key - t0);
      for (int t = skip; t < n; ++t) {
        kv_load_f32(dtype, cache.key_row(0, t0 + t, kvh), D, kb.data() + size_t(t) * D);
        kv_load_f32(dtype, cache.value_row(0, t0 + t, kvh), D, vb.data() + size_t(t) * D);
      }
      attend_block(q.data() + size_t(h) * D, kb.data() + size_t(skip) * D, vb.data() + size_t(skip) * D, n - skip, D,
                   scale, scores.data(), &m, &l, acc.data());
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < D; ++d) expected[size_t(h) * D + d] = acc[d] * inv;
  }
  EXPECT_EQ(bits(expected.data(), expected.size()), bits(out.data(), out.size()));
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (KvType type : {KvType::kF16, KvType::kBF16})
    for (int count : {1, 7, 64, 200})
      for (int head_dim : {64, 128, 256})
        for (int group : {1, 2, 3, 4, 8}) all.push_back({type, count, head_dim, group, 0});
  // A sliding window whose first key falls inside a block (rows skipped in place).
  for (KvType type : {KvType::kF16, KvType::kBF16}) all.push_back({type, 200, 128, 2, 50});
  // A head_dim no vector width divides: the dims past the last full vector go through
  // the scalar tails (RowAt) on every target but SCALAR.
  for (KvType type : {KvType::kF16, KvType::kBF16}) all.push_back({type, 70, 72, 2, 0});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Shapes, StoredAttentionTest, ::testing::ValuesIn(cases()), name);

}  // namespace
}  // namespace nextn
