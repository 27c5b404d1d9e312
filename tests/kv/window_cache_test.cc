// tests/kv/window_cache_test.cc — sliding-window KV rings (Gemma): attention with the
// window mask against a double-precision reference after the ring has wrapped many
// times, memory bounded by the ring, speculative rollback (rejected verify rows never
// evict keys the accepted prefix needs: bit-identical to a cache fed only the accepted
// rows) and the lengths a ring can return to.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kv/full_precision_cache.h"
#include "util/dtype.h"
#include "util/error.h"
#include "kv_test_util.h"

namespace nextn {
namespace {

KvShape ring_shape(int window, int slack, int max_tokens) {
  KvShape s{2, 4, 2, 16, max_tokens};
  s.window = window;
  s.ring_tokens = window + slack;
  return s;
}

TEST(WindowCache, MatchesWindowedReferenceAfterTheRingWraps) {
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
    for (int window : {1, 7, 40, 64, 100}) {
      const int slack = std::max(32, window);
      KvShape s = ring_shape(window, slack, 1000);
      FullPrecisionCache cache(s, type);
      const int kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim, len = 420;
      auto k = testing_kv::random_floats(size_t(len) * kv_dim, 1), v = testing_kv::random_floats(size_t(len) * kv_dim, 2);
      auto q = testing_kv::random_floats(size_t(slack) * q_dim, 3);
      int pos = 0;
      // Uneven pieces, each at most the slack; attention checked after every piece.
      for (int piece : {1, 5, 31, 17, 32, 3, 29, 32, 9, 30, 32, 32, 32, 32, 32, 32, 32, 32, 32, 21}) {
        const int m = std::min({piece, slack, len - pos});
        if (m <= 0) break;
        for (int l = 0; l < 2; ++l)
          cache.append(l, pos, m, k.data() + size_t(pos) * kv_dim, v.data() + size_t(pos) * kv_dim);
        std::vector<float> out(size_t(m) * q_dim);
        cache.attend(1, pos, m, q.data(), out.data(), 0.3f);
        EXPECT_LT(testing_kv::max_abs_diff(testing_kv::reference_attention(s, type, k, v, pos, m, q.data(), 0.3), out), 2e-5)
            << kv_type_name(type) << " window " << window << " at " << pos;
        pos += m;
      }
      EXPECT_GT(pos, s.ring_tokens * 2) << "the ring did not wrap";
      // Memory stays at the ring, not the sequence.
      EXPECT_LE(cache.bytes_used(), size_t(2) * s.ring_tokens * 2 * kv_dim * dtype_size(cache.storage_dtype()));
      EXPECT_LE(cache.f16_equivalent_bytes(), size_t(2) * s.ring_tokens * 2 * kv_dim * 2);
    }
  }
}

// A verify of 1 + k rows (k = 16) is appended, j of its rows accepted, the rest
// truncated away, then decoding goes on: every later attention equals a cache that only
// ever saw the accepted rows, bit for bit.
TEST(WindowCache, RejectedVerifyRowsNeverEvictTheAcceptedWindow) {
  const int window = 24, slack = 32, rows = 17;
  const KvShape s = ring_shape(window, slack, 2000);
  const int kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim;
  auto k = testing_kv::random_floats(size_t(600) * kv_dim, 4), v = testing_kv::random_floats(size_t(600) * kv_dim, 5);
  auto junk_k = testing_kv::random_floats(size_t(rows) * kv_dim, 6), junk_v = testing_kv::random_floats(size_t(rows) * kv_dim, 7);
  auto q = testing_kv::random_floats(size_t(rows) * q_dim, 8);
  for (int base : {10, 63, 64, 100, 255}) {
    for (int accepted = 0; accepted <= rows; ++accepted) {
      FullPrecisionCache spec(s, KvType::kF16), plain(s, KvType::kF16);
      for (int p = 0; p < base; p += slack) {
        const int m = std::min(slack, base - p);
        spec.append(0, p, m, k.data() + size_t(p) * kv_dim, v.data() + size_t(p) * kv_dim);
        plain.append(0, p, m, k.data() + size_t(p) * kv_dim, v.data() + size_t(p) * kv_dim);
      }
      // The verify: `accepted` real rows, then rejected junk.
      std::vector<float> vk(size_t(rows) * kv_dim), vv(size_t(rows) * kv_dim);
      for (int r = 0; r < rows; ++r)
        for (int d = 0; d < kv_dim; ++d) {
          const bool real = r < accepted;
          vk[size_t(r) * kv_dim + d] = real ? k[size_t(base + r) * kv_dim + d] : junk_k[size_t(r) * kv_dim + d];
          vv[size_t(r) * kv_dim + d] = real ? v[size_t(base + r) * kv_dim + d] : junk_v[size_t(r) * kv_dim + d];
        }
      spec.append(0, base, rows, vk.data(), vv.data());
      ASSERT_LE(spec.min_truncate_length(), base) << "a verify made its own start unreachable";
      spec.truncate(base + accepted);
      plain.append(0, base, accepted, k.data() + size_t(base) * kv_dim, v.data() + size_t(base) * kv_dim);
      // Keep decoding past the window on both.
      for (int p = base + accepted; p < base + accepted + 40; ++p) {
        spec.append(0, p, 1, k.data() + size_t(p) * kv_dim, v.data() + size_t(p) * kv_dim);
        plain.append(0, p, 1, k.data() + size_t(p) * kv_dim, v.data() + size_t(p) * kv_dim);
        std::vector<float> a(q_dim), b(q_dim);
        spec.attend(0, p, 1, q.data(), a.data(), 0.25f);
        plain.attend(0, p, 1, q.data(), b.data(), 0.25f);
        ASSERT_EQ(a, b) << "base " << base << " accepted " << accepted << " at " << p;
      }
    }
  }
}

TEST(WindowCache, ReturnableLengthsAndMisuse) {
  const KvShape s = ring_shape(10, 32, 500);
  FullPrecisionCache cache(s, KvType::kF32);
  const int kv_dim = s.n_kv_heads * s.head_dim;
  auto k = testing_kv::random_floats(size_t(300) * kv_dim, 9);
  EXPECT_EQ(cache.min_truncate_length(), 0);
  for (int p = 0; p < 300; p += 30) {
    cache.append(0, p, 30, k.data() + size_t(p) * kv_dim, k.data() + size_t(p) * kv_dim);
    cache.append(1, p, 30, k.data() + size_t(p) * kv_dim, k.data() + size_t(p) * kv_dim);
  }
  const int lo = cache.min_truncate_length();
  EXPECT_GT(lo, 0);
  EXPECT_LE(lo, 300 - 30);  // the last forward's rows stay reachable
  EXPECT_THROW(cache.truncate(lo - 1), Error);  // the window before it is overwritten
  std::vector<float> q(size_t(s.n_heads) * s.head_dim, 1.0f), out(q.size());
  cache.truncate(lo);
  cache.attend(0, lo - 1, 1, q.data(), out.data(), 1.0f);  // every key it needs is there
  // One append larger than the ring's slack would evict its own window.
  FullPrecisionCache small(s, KvType::kF32);
  std::vector<float> big(size_t(200) * kv_dim, 0.5f);
  EXPECT_THROW(small.append(0, 0, 200, big.data(), big.data()), Error);
  cache.truncate(0);
  EXPECT_EQ(cache.min_truncate_length(), 0);
}

TEST(WindowCache, FactoryGivesRingsForEveryKvType) {
  const KvShape s = ring_shape(16, 32, 100);
  for (const char* name : {"f32", "f16", "bf16", "q8", "q4", "turbo4"}) {
    KvOptions o;
    o.type = parse_kv_type(name);
    auto cache = make_kv_cache(s, o);
    const bool full = o.type == KvType::kF32 || o.type == KvType::kF16 || o.type == KvType::kBF16;
    EXPECT_EQ(cache->type(), full ? o.type : KvType::kF16) << name;
    EXPECT_EQ(cache->shape().window, 16);
  }
}

}  // namespace
}  // namespace nextn
