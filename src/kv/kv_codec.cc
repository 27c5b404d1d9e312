// kv/kv_codec.cc — row sizes and the scalar encoders/decoders of kv_codec.h.
#include "kv/kv_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kv/turbo_codebook.h"
#include "util/dtype.h"
#include "util/error.h"

namespace nextn {

namespace {

void put_f16(uint8_t* p, float v) {
  uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
float get_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Code of coordinate i in the nibble layout (Q4/Turbo4) and the 2+1 plane layout (Turbo3).
void set_nibble(uint8_t* codes, int i, int code) {
  int j = i / 16, l = i % 16;
  codes[(j / 2) * 16 + l] |= static_cast<uint8_t>(code << (4 * (j % 2)));
}
int get_nibble(const uint8_t* codes, int i) {
  int j = i / 16, l = i % 16;
  return (codes[(j / 2) * 16 + l] >> (4 * (j % 2))) & 15;
}
void set_code3(uint8_t* codes, int block, int i, int code) {
  int j = i / 16, l = i % 16;
  codes[(j / 4) * 16 + l] |= static_cast<uint8_t>((code & 3) << (2 * (j % 4)));
  if (!(code & 4)) return;
  if (block == 128) codes[32 + l] |= static_cast<uint8_t>(1u << j);  // byte l, bit j
  else codes[block / 4 + 2 * j + l / 8] |= static_cast<uint8_t>(1u << (l % 8));  // u16 word j, bit l
}
int get_code3(const uint8_t* codes, int block, int i) {
  int j = i / 16, l = i % 16;
  int low = (codes[(j / 4) * 16 + l] >> (2 * (j % 4))) & 3;
  const int high = block == 128 ? (codes[32 + l] >> j) & 1 : (codes[block / 4 + 2 * j + l / 8] >> (l % 8)) & 1;
  return low | (high << 2);
}

void encode_affine(const float* x, int g, int bits, uint8_t* out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < g; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  const int qmax = (1 << bits) - 1;
  // Store the rounded scale/bias and quantize against them, so decode matches.
  float scale = f16_to_f32(f32_to_f16((hi - lo) / qmax));
  float bias = f16_to_f32(f32_to_f16(lo));
  put_f16(out, scale);
  put_f16(out + 2, bias);
  uint8_t* codes = out + 4;
  if (bits == 4) std::memset(codes, 0, g / 2);
  float inv = scale > 0 ? 1.0f / scale : 0.0f;
  for (int i = 0; i < g; ++i) {
    int c = static_cast<int>(std::lround((x[i] - bias) * inv));
    c = std::clamp(c, 0, qmax);
    if (bits == 8) codes[i] = static_cast<uint8_t>(c);
    else set_nibble(codes, i, c);
  }
}

void encode_turbo(const float* y, int block, int bits, const float* table, uint8_t* out) {
  const TurboCodebook& cb = turbo_codebook(bits, block);
  uint8_t* codes = out + 2;
  std::memset(codes, 0, bits == 4 ? block / 2 : 3 * block / 8);
  double norm2 = 0;
  for (int i = 0; i < block; ++i) norm2 += double(y[i]) * y[i];
  float norm = static_cast<float>(std::sqrt(norm2));
  if (!(norm > 1e-20f)) {  // zero (or non-finite) block: all codes 0, scale 0
    put_f16(out, 0.0f);
    return;
  }
  uint8_t idx[kMaxRowDim];
  const double cnorm2 = turbo_quantize(y, block, 1.0f / norm, cb.boundaries, cb.centroids, cb.size, idx);
  for (int i = 0; i < block; ++i) {
    if (bits == 4) set_nibble(codes, i, idx[i]);
    else set_code3(codes, block, i, idx[i]);
  }
  // Norm correction: the decoded block has exactly the original norm.
  put_f16(out, static_cast<float>(norm / std::sqrt(cnorm2)));
}

}  // namespace

int RowFormat::header_bytes() const {
  switch (codec) {
    case RowCodec::kF16: return 0;
    case RowCodec::kQ8:
    case RowCodec::kQ4: return 4;
    default: return 2;
  }
}

size_t RowFormat::group_bytes() const {
  switch (codec) {
    case RowCodec::kF16: return 2 * static_cast<size_t>(group);
    case RowCodec::kQ8: return 4 + group;
    case RowCodec::kQ4: return 4 + group / 2;
    case RowCodec::kTurbo4: return 2 + group / 2;
    case RowCodec::kTurbo3: return 2 + 3 * group / 8;
  }
  return 0;
}

void encode_row(const RowFormat& f, const float* x, uint8_t* out) {
  const int g = f.group;
  for (int gi = 0; gi < f.n_groups(); ++gi, x += g, out += f.group_bytes()) {
    switch (f.codec) {
      case RowCodec::kF16: f32_to_f16_row(x, g, out); break;
      case RowCodec::kQ8: encode_affine(x, g, 8, out); break;
      case RowCodec::kQ4: encode_affine(x, g, 4, out); break;
      case RowCodec::kTurbo3: encode_turbo(x, g, 3, f.table, out); break;
      case RowCodec::kTurbo4: encode_turbo(x, g, 4, f.table, out); break;
    }
  }
}

void decode_row(const RowFormat& f, const uint8_t* in, float* x) {
  const int g = f.group;
  for (int gi = 0; gi < f.n_groups(); ++gi, x += g, in += f.group_bytes()) {
    const uint8_t* codes = in + f.header_bytes();
    switch (f.codec) {
      case RowCodec::kF16: f16_to_f32_row(in, g, x); break;
      case RowCodec::kQ8:
      case RowCodec::kQ4: {
        float scale = get_f16(in), bias = get_f16(in + 2);
        for (int i = 0; i < g; ++i)
          x[i] = scale * (f.codec == RowCodec::kQ8 ? codes[i] : get_nibble(codes, i)) + bias;
        break;
      }
      case RowCodec::kTurbo3:
      case RowCodec::kTurbo4: {
        float scale = get_f16(in);
        for (int i = 0; i < g; ++i)
          x[i] = scale * f.table[f.codec == RowCodec::kTurbo4 ? get_nibble(codes, i) : get_code3(codes, g, i)];
        break;
      }
    }
  }
}

}  // namespace nextn
