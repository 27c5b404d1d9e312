// tests/kv/window_cache_test.cc — sliding-window KV rings (Gemma): attention with the
// window mask against a double-precision reference after the ring has wrapped many
// times, attend_ahead (an image's rows seeing each other, Gemma 4 "vision") against the
// same reference with the rule (k ≤ q or same image) and k > q − window, prefill chunks
// (the many-query path) bit-identical to attending one row at a time, memory bounded by
// the ring, speculative rollback (rejected verify rows never evict keys the accepted
// prefix needs: bit-identical to a cache fed only the accepted rows) and the lengths a
// ring can return to.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
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

// Float64 attention where row r sees keys [max(0, pos + r − window + 1), end[r]).
std::vector<double> reference_ahead(const KvShape& s, const std::vector<float>& k, const std::vector<float>& v, int pos,
                                    int n, const float* q, double scale, const std::vector<int32_t>& end) {
  const int D = s.head_dim, g = s.n_heads / s.n_kv_heads;
  std::vector<double> out(size_t(n) * s.n_heads * D, 0.0);
  for (int r = 0; r < n; ++r)
    for (int hq = 0; hq < s.n_heads; ++hq) {
      const int h = hq / g, lo = s.window > 0 ? std::max(0, pos + r - s.window + 1) : 0, hi = end[size_t(r)];
      const float* qr = q + (size_t(r) * s.n_heads + hq) * D;
      std::vector<double> sc(size_t(hi - lo));
      double mx = -1e300, z = 0;
      for (int t = lo; t < hi; ++t) {
        double d = 0;
        for (int i = 0; i < D; ++i) d += double(qr[i]) * k[(size_t(t) * s.n_kv_heads + h) * D + i];
        mx = std::max(mx, sc[size_t(t - lo)] = d * scale);
      }
      for (double& x : sc) z += (x = std::exp(x - mx));
      double* o = out.data() + (size_t(r) * s.n_heads + hq) * D;
      for (int t = lo; t < hi; ++t)
        for (int i = 0; i < D; ++i) o[i] += sc[size_t(t - lo)] / z * v[(size_t(t) * s.n_kv_heads + h) * D + i];
    }
  return out;
}

// A piece of 30 rows at position 40 whose rows 5..16 are one image: those rows see every
// key up to the image's end (their window still bounds the past), the others are causal;
// key_end values at or below a row's own position change nothing. Windowed (per-query
// bounds inside a block) and unwindowed (transposed shared keys) caches, both through
// their many-query paths (30 rows x 2 queries per KV head).
TEST(WindowCache, AttendAheadLetsAnImageSeeItself) {
  for (int window : {8, 0}) {
    KvShape s = window > 0 ? ring_shape(window, 32, 200) : KvShape{1, 4, 2, 16, 200};
    FullPrecisionCache cache(s, KvType::kF32);
    const int kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim, pos = 40, n = 30;
    auto k = testing_kv::random_floats(size_t(pos + n) * kv_dim, 11), v = testing_kv::random_floats(size_t(pos + n) * kv_dim, 12);
    auto q = testing_kv::random_floats(size_t(n) * q_dim, 13, 0.3f);
    cache.append(0, 0, 20, k.data(), v.data());
    cache.append(0, 20, 20, k.data() + size_t(20) * kv_dim, v.data() + size_t(20) * kv_dim);
    cache.append(0, pos, n, k.data() + size_t(pos) * kv_dim, v.data() + size_t(pos) * kv_dim);
    std::vector<int32_t> key_end(size_t(n), -1), end(static_cast<size_t>(n), 0);
    for (int r = 0; r < n; ++r) {
      if (r >= 5 && r < 17) key_end[size_t(r)] = pos + 17;
      if (r == 20) key_end[size_t(r)] = pos + 3;  // behind the row: causal
      end[size_t(r)] = std::max(pos + r + 1, int(key_end[size_t(r)]));
    }
    std::vector<float> out(size_t(n) * q_dim), causal(out.size());
    cache.attend_ahead(0, pos, n, q.data(), out.data(), 0.5f, key_end.data());
    EXPECT_LT(testing_kv::max_abs_diff(reference_ahead(s, k, v, pos, n, q.data(), 0.5, end), out), 2e-5) << window;
    cache.attend(0, pos, n, q.data(), causal.data(), 0.5f);
    for (int r = 0; r < n; ++r) {
      const bool image = r >= 5 && r < 16;  // the image's last row sees nothing new
      const float* a = out.data() + size_t(r) * q_dim;
      const float* b = causal.data() + size_t(r) * q_dim;
      EXPECT_EQ(std::equal(a, a + q_dim, b), !image) << "row " << r << " window " << window;
    }
    // Past the stored rows is an internal error.
    key_end[0] = pos + n + 1;
    EXPECT_THROW(cache.attend_ahead(0, pos, n, q.data(), out.data(), 0.5f, key_end.data()), Error);
  }
  // Compressed caches refuse.
  KvOptions o;
  o.type = KvType::kQ8;
  o.group_size = 32;
  auto q8 = make_kv_cache(KvShape{1, 4, 2, 32, 100}, o);
  std::vector<float> kv(size_t(4) * 64, 0.1f), q(size_t(4) * 128, 0.1f), out(q.size());
  q8->append(0, 0, 4, kv.data(), kv.data());
  const int32_t ends[4] = {4, 4, 4, 4};
  EXPECT_THROW(q8->attend_ahead(0, 0, 4, q.data(), out.data(), 1.0f, ends), Error);
}

// Prefill chunks of a windowed cache (16 or more queries per KV head and row chunk) take
// the many-query path, whose per-query bounds inside a block (the window's first key,
// the causal or image end) must give exactly what attending each row alone gives (the
// one-query path, fewer than 16 queries): bit for bit, and within float rounding of a
// float64 reference. Windows smaller and larger than the chunk and than a 64-key block,
// chunks starting mid-window and mid-block, F32/F16/BF16 storage, GQA groups of 1, 2 and
// 4, head dims with and without a remainder past the vector width, images (rows seeing
// ahead to the image's end), and keys no row of the chunk may see set to NaN: a NaN
// reaching any output would show that such a key was read.
TEST(WindowCache, ManyQueryPrefillEqualsOneRowAtATime) {
  struct Heads {
    int heads, kv_heads, head_dim;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16})
    for (Heads h : {Heads{4, 4, 24}, Heads{4, 2, 16}, Heads{8, 2, 64}})
      for (int window : {1, 5, 20, 64, 100, 300})
        for (int n : {16, 53})
          for (int pos : {0, 29, 250}) {
            const int group = h.heads / h.kv_heads, slack = 64;
            KvShape s{1, h.heads, h.kv_heads, h.head_dim, 1000};
            s.window = window;
            s.ring_tokens = window + slack;
            FullPrecisionCache cache(s, type);
            const int kv_dim = h.kv_heads * h.head_dim, q_dim = h.heads * h.head_dim, len = pos + n;
            auto k = testing_kv::random_floats(size_t(len) * kv_dim, 31), v = testing_kv::random_floats(size_t(len) * kv_dim, 32);
            auto q = testing_kv::random_floats(size_t(n) * q_dim, 33, 0.5f);
            // Keys before the chunk's first window are never to be read.
            const int first_key = std::max(0, pos - window + 1);
            std::fill(k.begin(), k.begin() + ptrdiff_t(first_key) * kv_dim, nan);
            std::fill(v.begin(), v.begin() + ptrdiff_t(first_key) * kv_dim, nan);
            for (int p = 0; p < pos; p += slack) {
              const int m = std::min(slack, pos - p);
              cache.append(0, p, m, k.data() + size_t(p) * kv_dim, v.data() + size_t(p) * kv_dim);
            }
            cache.append(0, pos, n, k.data() + size_t(pos) * kv_dim, v.data() + size_t(pos) * kv_dim);
            // Two images, short enough that one image's rows are fewer than 16 queries: rows
            // 2.. and the chunk's last rows. Row 1 has an end behind itself (causal).
            const int image = std::min(15 / group, n / 3);
            std::vector<int32_t> key_end(size_t(n), -1), end(static_cast<size_t>(n));
            for (int r = 0; r < n; ++r) {
              if (r >= 2 && r < 2 + image) key_end[size_t(r)] = pos + 2 + image;
              if (r >= n - image) key_end[size_t(r)] = pos + n;
              if (r == 1) key_end[size_t(r)] = pos;
              end[size_t(r)] = std::max(pos + r + 1, int(key_end[size_t(r)]));
            }
            for (bool ahead : {false, true}) {
              std::vector<float> out(size_t(n) * q_dim), one(q_dim);
              std::vector<int32_t> ends(static_cast<size_t>(n));
              for (int r = 0; r < n; ++r) ends[size_t(r)] = ahead ? end[size_t(r)] : pos + r + 1;
              cache.attend_ahead(0, pos, n, q.data(), out.data(), 0.3f, ahead ? key_end.data() : nullptr);
              const std::string where = std::string(kv_type_name(type)) + " heads " + std::to_string(h.heads) + "/" +
                                        std::to_string(h.kv_heads) + " dim " + std::to_string(h.head_dim) +
                                        " window " + std::to_string(window) + " pos " + std::to_string(pos) +
                                        " n " + std::to_string(n) + (ahead ? " images" : "");
              auto as_stored = [&](std::vector<float> x) {
                for (float& e : x) e = testing_kv::stored(type, e);
                return x;
              };
              const auto ref = reference_ahead(s, as_stored(k), as_stored(v), pos, n, q.data(), 0.3, ends);
              EXPECT_LT(testing_kv::max_abs_diff(ref, out), 2e-5) << where;
              for (int r = 0; r < n; ++r) {
                // Row r alone, or with the rest of its image (the rows it sees ahead).
                const int rows = ends[size_t(r)] - (pos + r);
                ASSERT_LT(rows * group, 16) << "not the one-query path";
                std::vector<float> alone(size_t(rows) * q_dim);
                cache.attend_ahead(0, pos + r, rows, q.data() + size_t(r) * q_dim, alone.data(), 0.3f,
                                   ahead ? key_end.data() + r : nullptr);
                ASSERT_TRUE(std::equal(alone.begin(), alone.begin() + q_dim, out.begin() + ptrdiff_t(r) * q_dim))
                    << where << " row " << r;
              }
            }
          }
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
