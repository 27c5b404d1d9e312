// tests/kv/compressed_cache_test.cc — Q8/Q4/TurboQuant KV caches: round-trip
// error bounds per type, and attention on the stored codes against a float64
// reference (causal, GQA, multi-row chunks, decode rows, truncate/rollback
// including into the compressed region, ring wrap-around of the F16 window).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kv/full_precision_cache.h"
#include "kv/kv_codec.h"
#include "kv/quantized_cache.h"
#include "kv/turbo_cache.h"
#include "kv/turbo_codebook.h"
#include "kv_test_util.h"
#include "util/error.h"

namespace nextn {
namespace {

using testing_kv::random_floats;

// ---------------------------------------------------------------- round trips

TEST(QuantizedRoundTrip, ErrorWithinHalfAStep) {
  for (int bits : {8, 4}) {
    for (int group : {32, 64, 128}) {
      RowFormat f;
      f.codec = bits == 8 ? RowCodec::kQ8 : RowCodec::kQ4;
      f.dim = 128;
      f.group = group;
      std::vector<uint8_t> buf(f.row_bytes());
      std::vector<float> y(f.dim);
      for (int trial = 0; trial < 50; ++trial) {
        auto x = random_floats(f.dim, 100 + trial, 1.0f + trial * 0.3f, trial % 3 - 1.0f);
        encode_row(f, x.data(), buf.data());
        decode_row(f, buf.data(), y.data());
        for (int g0 = 0; g0 < f.dim; g0 += group) {
          float lo = x[g0], hi = x[g0];
          for (int i = g0; i < g0 + group; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
          const float step = (hi - lo) / ((1 << bits) - 1);
          // Half a step, plus f16 rounding of scale and bias.
          const float bound = 0.5f * step * 1.01f + 1e-3f * std::max(std::abs(lo), std::abs(hi));
          for (int i = g0; i < g0 + group; ++i)
            ASSERT_LE(std::abs(x[i] - y[i]), bound) << "bits " << bits << " group " << group << " i " << i;
        }
      }
    }
  }
}

TEST(TurboRoundTrip, MseMatchesTheCodebookAndNormIsKept) {
  for (int block : {64, 128}) {
    for (int bits : {3, 4}) {
      RowFormat f;
      f.codec = bits == 3 ? RowCodec::kTurbo3 : RowCodec::kTurbo4;
      f.dim = 2 * block;
      f.group = block;
      f.table = turbo_codebook(bits, block).centroids;
      std::vector<uint8_t> buf(f.row_bytes());
      std::vector<float> y(f.dim);
      RandomizedHadamard rot(block);
      double rel = 0;
      const int trials = 400;
      for (int trial = 0; trial < trials; ++trial) {
        // Anisotropic input (outlier channel) — the rotation makes it Gaussian-like.
        auto x = random_floats(f.dim, 7 + trial, 0.5f);
        x[3] += 8.0f;
        auto r = x;
        rot.forward(r.data(), 2);
        encode_row(f, r.data(), buf.data());
        decode_row(f, buf.data(), y.data());
        rot.inverse(y.data(), 2);
        for (int b = 0; b < 2; ++b) {
          double e = 0, n = 0, m = 0;
          for (int i = b * block; i < (b + 1) * block; ++i) {
            e += (x[i] - y[i]) * double(x[i] - y[i]);
            n += double(x[i]) * x[i];
            m += double(y[i]) * y[i];
          }
          rel += e / n;
          ASSERT_NEAR(std::sqrt(m / n), 1.0, 2e-3);  // norm correction (f16 scale)
        }
      }
      rel /= 2 * trials;
      // ‖x − x̃‖²/‖x‖² ≈ d·MSE of the Lloyd–Max table (0.034 at 3 bits, 0.0093 at 4 bits).
      const double dmse = bits == 3 ? 0.034 : 0.0093;
      EXPECT_GT(rel, 0.8 * dmse) << block << " " << bits;
      EXPECT_LT(rel, 1.2 * dmse) << block << " " << bits;
    }
  }
}

TEST(TurboRoundTrip, ZeroRowStaysZero) {
  RowFormat f;
  f.codec = RowCodec::kTurbo3;
  f.dim = f.group = 128;
  f.table = turbo_codebook(3, 128).centroids;
  std::vector<float> x(128, 0.0f), y(128, 1.0f);
  std::vector<uint8_t> buf(f.row_bytes());
  encode_row(f, x.data(), buf.data());
  decode_row(f, buf.data(), y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(CompressedFormats, BitsPerValue) {
  KvShape s{1, 16, 8, 128, 64};
  KvOptions o;
  o.type = KvType::kTurbo3;
  EXPECT_EQ(TurboCache(s, o).compressed_format().row_bytes(), 50u);  // 3.125 bits/value
  o.type = KvType::kTurbo4;
  EXPECT_EQ(TurboCache(s, o).compressed_format().row_bytes(), 66u);  // 4.125 bits/value
  o.type = KvType::kQ4;
  EXPECT_EQ(QuantizedCache(s, o).format().row_bytes(), 72u);  // 4.5 bits/value at group 64
  o.type = KvType::kQ8;
  EXPECT_EQ(QuantizedCache(s, o).format().row_bytes(), 136u);  // 8.5 bits/value
}

TEST(CompressedFormats, GroupSizeIsValidated) {
  KvShape s{1, 4, 2, 64, 16};
  KvOptions o;
  o.type = KvType::kQ4;
  o.group_size = 48;
  try {
    QuantizedCache c(s, o);
    FAIL() << "accepted group 48";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_group_size"), std::string::npos);
  }
  o.group_size = 128;  // does not divide head_dim 64
  EXPECT_THROW(QuantizedCache(s, o), Error);
}

// ---------------------------------------------------------------- attention

struct Scenario {
  KvShape shape;
  KvOptions options;
};

std::unique_ptr<KvCache> make(const Scenario& s) {
  if (s.options.type == KvType::kQ8 || s.options.type == KvType::kQ4)
    return std::make_unique<QuantizedCache>(s.shape, s.options);
  return std::make_unique<TurboCache>(s.shape, s.options);
}

void read_token(const KvCache& cache, int layer, int t, float* k, float* v) {
  if (auto* q = dynamic_cast<const QuantizedCache*>(&cache)) return q->read(layer, t, k, v);
  dynamic_cast<const TurboCache&>(cache).read(layer, t, k, v);
}

// Appends `n` random rows to every layer, then checks attention of those rows
// (positions [pos, pos + n)) against float64 attention over what the cache stores.
void append_and_check(KvCache& cache, int n, unsigned seed, double* worst) {
  const KvShape& s = cache.shape();
  const int D = s.head_dim, pos = cache.length();
  const float scale = 1.0f / std::sqrt(float(D));
  for (int layer = 0; layer < s.n_layers; ++layer) {
    auto k = random_floats(size_t(n) * s.n_kv_heads * D, seed + 11 * layer);
    auto v = random_floats(size_t(n) * s.n_kv_heads * D, seed + 11 * layer + 5);
    // Larger queries → peaked softmax, a harder test of the max/rescale logic.
    auto q = random_floats(size_t(n) * s.n_heads * D, seed + 11 * layer + 7, 2.0f);
    cache.append(layer, pos, n, k.data(), v.data());
    std::vector<float> out(q.size(), -1.0f);
    cache.attend(layer, pos, n, q.data(), out.data(), scale);
    std::vector<float> kt(size_t(s.n_kv_heads) * D), vt(kt.size());
    int cached_t = -1;
    auto ref = testing_kv::reference_attention(s.n_heads, s.n_kv_heads, D, pos, n, q.data(), scale,
                                               [&](int t, int h, float* ko, float* vo) {
                                                 if (t != cached_t) read_token(cache, layer, t, kt.data(), vt.data()), cached_t = t;
                                                 std::copy(kt.begin() + h * D, kt.begin() + (h + 1) * D, ko);
                                                 std::copy(vt.begin() + h * D, vt.begin() + (h + 1) * D, vo);
                                               });
    double d = testing_kv::max_abs_diff(ref, out);
    *worst = std::max(*worst, d);
    ASSERT_LT(d, 2e-5) << kv_type_name(cache.type()) << " layer " << layer << " pos " << pos << " n " << n;
  }
  ASSERT_EQ(cache.length(), pos + n);
}

void run_scenario(const Scenario& sc) {
  auto cache = make(sc);
  double worst = 0;
  unsigned seed = 1;
  // Prefill chunks, decode rows, a verify batch.
  for (int n : {37, 1, 64, 5, 1, 1, 130, 3}) append_and_check(*cache, n, seed += 100, &worst);
  // Roll back a verify batch (rejected rows), then continue.
  cache->truncate(cache->length() - 2);
  for (int n : {1, 4}) append_and_check(*cache, n, seed += 100, &worst);
  // Roll back deep (into the compressed region for Turbo) and regrow past the window.
  cache->truncate(50);
  EXPECT_EQ(cache->length(), 50);
  for (int n : {2, 90, 1, 70}) append_and_check(*cache, n, seed += 100, &worst);
  cache->truncate(0);
  EXPECT_EQ(cache->length(), 0);
  EXPECT_EQ(cache->bytes_used(), 0u);
  append_and_check(*cache, 9, seed += 100, &worst);
  ::testing::Test::RecordProperty("worst_abs_diff", std::to_string(worst));
}

KvShape shape(int n_heads, int n_kv, int D, int max_tokens = 400) { return KvShape{2, n_heads, n_kv, D, max_tokens}; }

KvOptions opts(KvType type, int group = 64, int after = 40, int keep = 16) {
  KvOptions o;
  o.type = type;
  o.group_size = group;
  o.compress_after = after;
  o.keep_recent = keep;
  return o;
}

TEST(QuantizedAttention, MatchesFloat64Reference) {
  for (KvType t : {KvType::kQ8, KvType::kQ4})
    for (int group : {32, 64}) {
      SCOPED_TRACE(testing::Message() << kv_type_name(t) << " group " << group);
      run_scenario({shape(4, 2, 64), opts(t, group)});  // GQA 2
      run_scenario({shape(3, 3, 128), opts(t, group)});  // MHA
    }
}

TEST(TurboAttention, MatchesFloat64ReferenceWithWindowAndRingWrap) {
  for (KvType t : {KvType::kTurbo3, KvType::kTurbo4}) {
    SCOPED_TRACE(kv_type_name(t));
    run_scenario({shape(4, 2, 64), opts(t)});               // block 64, GQA 2
    run_scenario({shape(8, 2, 128), opts(t, 64, 40, 16)});  // block 128, GQA 4
    run_scenario({shape(2, 1, 96), opts(t, 64, 10, 30)});   // padded 96 → 128
  }
}

TEST(TurboAttention, EverythingCompressed) {
  for (KvType t : {KvType::kTurbo3, KvType::kTurbo4}) {
    Scenario sc{shape(4, 2, 128), opts(t, 64, 0, 0)};
    run_scenario(sc);
    auto cache = make(sc);
    std::vector<float> k(3 * 2 * 128, 0.5f), v = k;
    cache->append(0, 0, 3, k.data(), v.data());
    EXPECT_EQ(dynamic_cast<TurboCache&>(*cache).compressed_length(0), 3);
  }
}

TEST(TurboPolicy, CompressesPastThresholdKeepingRecentWindow) {
  KvShape s = shape(4, 2, 128, 5000);
  KvOptions o = opts(KvType::kTurbo3, 64, 2048, 256);
  TurboCache cache(s, o);
  std::vector<float> k(size_t(512) * 2 * 128, 0.25f), v = k;
  for (int i = 0; i < 4; ++i) cache.append(0, i * 512, 512, k.data(), v.data());  // 2048: nothing yet
  EXPECT_EQ(cache.compressed_length(0), 0);
  cache.append(0, 2048, 1, k.data(), v.data());
  EXPECT_EQ(cache.compressed_length(0), 2049 - 256);
  for (int i = 0; i < 63; ++i) cache.append(0, 2049 + i, 1, k.data(), v.data());
  EXPECT_EQ(cache.compressed_length(0), 2049 - 256);  // waits for a chunk of 64
  cache.append(0, 2112, 1, k.data(), v.data());
  EXPECT_EQ(cache.compressed_length(0), 2113 - 256);
  EXPECT_LE(cache.ring_capacity(), 2048 + 1 + 64 + 64);
}

TEST(TurboAttention, IdenticalToF16BeforeCompression) {
  KvShape s = shape(4, 2, 64, 512);
  TurboCache turbo(s, opts(KvType::kTurbo3, 64, 2048, 256));
  FullPrecisionCache f16(s, KvType::kF16);
  int pos = 0;
  for (int n : {100, 1, 1, 7}) {
    auto k = random_floats(size_t(n) * 2 * 64, pos + 1), v = random_floats(size_t(n) * 2 * 64, pos + 2);
    auto q = random_floats(size_t(n) * 4 * 64, pos + 3, 2.0f);
    std::vector<float> a(q.size()), b(q.size());
    turbo.append(0, pos, n, k.data(), v.data());
    f16.append(0, pos, n, k.data(), v.data());
    turbo.attend(0, pos, n, q.data(), a.data(), 0.125f);
    f16.attend(0, pos, n, q.data(), b.data(), 0.125f);
    // Same F16 keys and values; the two caches only group the float32 sums differently
    // (the turbo cache walks its window separately). Each sum of at most 109 + 64 terms is
    // within n·2^-24 of exact (Higham's bound for recursive summation), values are O(1):
    // the two results may differ by twice that, ~2e-5, whatever the SIMD width.
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-5);
    pos += n;
  }
  EXPECT_EQ(turbo.bytes_used(), f16.bytes_used());
}

TEST(TurboAttention, CloseToUncompressedAttention) {
  // Attention over real (uncompressed) keys vs over turbo4 codes: close, not equal.
  KvShape s = shape(2, 1, 128, 600);
  TurboCache turbo(s, opts(KvType::kTurbo4, 64, 0, 0));
  FullPrecisionCache f32(s, KvType::kF32);
  auto k = random_floats(512 * 128, 1), v = random_floats(512 * 128, 2), q = random_floats(2 * 128, 3);
  turbo.append(0, 0, 512, k.data(), v.data());
  f32.append(0, 0, 512, k.data(), v.data());
  std::vector<float> a(2 * 128), b(2 * 128);
  turbo.attend(0, 511, 1, q.data(), a.data(), 1 / std::sqrt(128.f));
  f32.attend(0, 511, 1, q.data(), b.data(), 1 / std::sqrt(128.f));
  double num = 0, den = 0;
  for (int i = 0; i < 256; ++i) num += (a[i] - b[i]) * double(a[i] - b[i]), den += double(b[i]) * b[i];
  EXPECT_LT(std::sqrt(num / den), 0.25);  // a loose sanity bound; KL is measured by kv-eval
}

}  // namespace
}  // namespace nextn
