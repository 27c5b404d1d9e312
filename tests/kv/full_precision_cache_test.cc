// tests/kv/full_precision_cache_test.cc — F32/F16/BF16 KV storage: causal GQA
// attention against a double-precision scalar reference over the stored (rounded)
// values, append in chunks, truncate + re-append, sizes and type names.
#include "kv/full_precision_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "util/dtype.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "kv_test_util.h"

namespace nextn {
namespace {

struct Case {
  KvType type;
  int heads, kv_heads, head_dim;
  int prefix;  // tokens appended before the checked chunk (in pieces)
  int n;       // query rows of the checked chunk
};

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesDoubleReference) {
  const Case c = GetParam();
  KvShape s{3, c.heads, c.kv_heads, c.head_dim, c.prefix + c.n + 4};
  FullPrecisionCache cache(s, c.type);
  const int len = c.prefix + c.n, kv_dim = c.kv_heads * c.head_dim;
  const int layer = 1;
  auto k = testing_kv::random_floats(size_t(len) * kv_dim, 1), v = testing_kv::random_floats(size_t(len) * kv_dim, 2);
  // The prefix in uneven pieces, then the checked chunk.
  int pos = 0;
  for (int piece : {1, 7, 64, 3, 100000}) {
    int m = std::min(piece, c.prefix - pos);
    if (m <= 0) break;
    cache.append(layer, pos, m, k.data() + size_t(pos) * kv_dim, v.data() + size_t(pos) * kv_dim);
    pos += m;
  }
  cache.append(layer, c.prefix, c.n, k.data() + size_t(c.prefix) * kv_dim, v.data() + size_t(c.prefix) * kv_dim);
  EXPECT_EQ(cache.length(), len);
  auto q = testing_kv::random_floats(size_t(c.n) * c.heads * c.head_dim, 3);
  std::vector<float> out(q.size(), -7.0f);
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  cache.attend(layer, c.prefix, c.n, q.data(), out.data(), scale);
  auto ref = testing_kv::reference_attention(s, c.type, k, v, c.prefix, c.n, q.data(), scale);
  EXPECT_LT(testing_kv::max_abs_diff(ref, out), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(Case{KvType::kF32, 4, 2, 16, 0, 1}, Case{KvType::kF32, 4, 2, 16, 0, 9},
                      Case{KvType::kF32, 8, 2, 64, 150, 1}, Case{KvType::kF32, 8, 8, 64, 70, 40},
                      Case{KvType::kF16, 8, 2, 64, 150, 1}, Case{KvType::kF16, 6, 3, 72, 33, 17},
                      Case{KvType::kBF16, 8, 1, 128, 200, 1}, Case{KvType::kBF16, 4, 4, 24, 5, 70},
                      Case{KvType::kF16, 16, 8, 128, 300, 5}, Case{KvType::kF32, 2, 1, 6, 63, 2}));

TEST(FullPrecisionCache, StableWithLargeScores) {
  KvShape s{1, 2, 1, 16, 8};
  FullPrecisionCache cache(s, KvType::kF32);
  auto k = testing_kv::random_floats(4 * 16, 5, 30.0f), v = testing_kv::random_floats(4 * 16, 6);
  cache.append(0, 0, 4, k.data(), v.data());
  auto q = testing_kv::random_floats(2 * 2 * 16, 7, 30.0f);
  std::vector<float> out(q.size());
  cache.attend(0, 2, 2, q.data(), out.data(), 0.25f);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  auto ref = testing_kv::reference_attention(s, KvType::kF32, k, v, 2, 2, q.data(), 0.25);
  EXPECT_LT(testing_kv::max_abs_diff(ref, out), 1e-4);
}

TEST(FullPrecisionCache, TruncateThenReappendEqualsFreshCache) {
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
    KvShape s{2, 4, 2, 32, 200};
    const int kv_dim = 64, q_dim = 128;
    auto k = testing_kv::random_floats(150 * kv_dim, 11), v = testing_kv::random_floats(150 * kv_dim, 12);
    auto junk_k = testing_kv::random_floats(60 * kv_dim, 13), junk_v = testing_kv::random_floats(60 * kv_dim, 14);
    FullPrecisionCache rolled(s, type), fresh(s, type);
    for (int l = 0; l < 2; ++l) {
      rolled.append(l, 0, 100, k.data(), v.data());
      rolled.append(l, 100, 60, junk_k.data(), junk_v.data());
      fresh.append(l, 0, 150, k.data(), v.data());
    }
    EXPECT_EQ(rolled.length(), 160);
    rolled.truncate(100);
    EXPECT_EQ(rolled.length(), 100);
    for (int l = 0; l < 2; ++l) rolled.append(l, 100, 50, k.data() + 100 * kv_dim, v.data() + 100 * kv_dim);
    EXPECT_EQ(rolled.bytes_used(), fresh.bytes_used());
    auto q = testing_kv::random_floats(10 * q_dim, 15);
    std::vector<float> a(q.size()), b(q.size());
    for (int l = 0; l < 2; ++l) {
      rolled.attend(l, 140, 10, q.data(), a.data(), 0.2f);
      fresh.attend(l, 140, 10, q.data(), b.data(), 0.2f);
      EXPECT_EQ(a, b) << kv_type_name(type);
    }
  }
}

TEST(FullPrecisionCache, SameResultWithOneOrTwoThreads) {
  KvShape s{1, 8, 2, 64, 300};
  FullPrecisionCache cache(s, KvType::kF16);
  auto k = testing_kv::random_floats(256 * 128, 21), v = testing_kv::random_floats(256 * 128, 22);
  cache.append(0, 0, 256, k.data(), v.data());
  auto q = testing_kv::random_floats(56 * 512, 23);
  std::vector<float> one(q.size()), two(q.size());
  ThreadPool::set_global_threads(1);
  cache.attend(0, 200, 56, q.data(), one.data(), 0.125f);
  ThreadPool::set_global_threads(2);
  cache.attend(0, 200, 56, q.data(), two.data(), 0.125f);
  EXPECT_EQ(one, two);
  ThreadPool::set_global_threads(0);
}

TEST(FullPrecisionCache, SizesAndLength) {
  KvShape s{4, 8, 2, 64, 100};
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
    FullPrecisionCache cache(s, type);
    EXPECT_EQ(cache.type(), type);
    EXPECT_EQ(cache.length(), 0);
    EXPECT_EQ(cache.bytes_used(), 0u);
    std::vector<float> kv(10 * 128, 0.5f);
    for (int l = 0; l < 4; ++l) cache.append(l, 0, 10, kv.data(), kv.data());
    const size_t elem = type == KvType::kF32 ? 4 : 2;
    EXPECT_EQ(cache.bytes_used(), 10u * 4 * 2 * 2 * 64 * elem);
    EXPECT_EQ(cache.f16_equivalent_bytes(), 10u * 4 * 2 * 2 * 64 * 2);
  }
}

TEST(FullPrecisionCache, MisuseIsAnError) {
  KvShape s{2, 2, 1, 8, 4};
  FullPrecisionCache cache(s, KvType::kF16);
  std::vector<float> kv(5 * 8, 1.0f);
  EXPECT_THROW(cache.append(0, 1, 1, kv.data(), kv.data()), Error);  // not at the end
  EXPECT_THROW(cache.append(0, 0, 5, kv.data(), kv.data()), Error);  // past capacity
  cache.append(0, 0, 2, kv.data(), kv.data());
  EXPECT_THROW(cache.truncate(3), Error);
  EXPECT_THROW(cache.append(2, 0, 1, kv.data(), kv.data()), Error);  // no such layer
  std::vector<float> q(2 * 8, 1.0f), out(2 * 8);
  EXPECT_THROW(cache.attend(0, 1, 2, q.data(), out.data(), 1.0f), Error);  // position 2 not stored
}

TEST(KvFactory, MakesFullPrecisionCaches) {
  KvShape s{2, 4, 2, 16, 32};
  for (const char* name : {"f32", "f16", "bf16"}) {
    KvOptions o;
    o.type = parse_kv_type(name);
    auto cache = make_kv_cache(s, o);
    EXPECT_STREQ(kv_type_name(cache->type()), name);
    EXPECT_EQ(cache->shape().n_layers, 2);
  }
  KvOptions o;
  EXPECT_EQ(o.type, KvType::kF16);  // the default storage
  s.n_kv_heads = 3;
  EXPECT_THROW(make_kv_cache(s, o), Error);
}

TEST(KvTypes, NamesRoundTrip) {
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8, KvType::kQ4, KvType::kTurbo3,
                   KvType::kTurbo4})
    EXPECT_EQ(parse_kv_type(kv_type_name(t)), t);
  try {
    parse_kv_type("fp8");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("'fp8'"), std::string::npos);
  }
}

}  // namespace
}  // namespace nextn
