// kernels/kquant_scales.h — the 12-byte 6-bit scale/min packing shared by Q4_K and
// Q5_K (8 sub-blocks of 32 per 256-element block), and the quantizer both use.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/weight_format.h"

namespace nextn {

// scales[12] → sc[8], m[8] (each 0..63).
inline void unpack_scale_min_k4(const uint8_t* scales, int* sc, int* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = scales[j] & 63;
    m[j] = scales[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    m[j] = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// scales[12] → the bytes sc[0..7] and m[0..7] (each 0..63), four bytes per word
// operation: the same packing as above read as three little-endian uint32 words a, b, c
// (sc[0..3] = a & 63, m[0..3] = b & 63, sc[4..7] and m[4..7] = the nibbles of c with the
// top two bits of a and b above them). For the matmul's block headers.
inline void unpack_scale_min_k4_bytes(const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  uint32_t a, b, c;
  std::memcpy(&a, scales, 4);
  std::memcpy(&b, scales + 4, 4);
  std::memcpy(&c, scales + 8, 4);
  const uint32_t low6 = 0x3F3F3F3Fu, low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
  const uint32_t sc_lo = a & low6, m_lo = b & low6;
  const uint32_t sc_hi = (c & low4) | (((a >> 6) & low2) << 4);
  const uint32_t m_hi = ((c >> 4) & low4) | (((b >> 6) & low2) << 4);
  // One 8-byte store each: a later 8-byte load of m then forwards from the store
  // (two 4-byte stores read back as 8 bytes stall the load for a dozen cycles).
  const uint64_t sc8 = sc_lo | static_cast<uint64_t>(sc_hi) << 32, m8 = m_lo | static_cast<uint64_t>(m_hi) << 32;
  std::memcpy(sc, &sc8, 8);
  std::memcpy(m, &m8, 8);
}

// sc[8], m[8] (each 0..63) → scales[12].
inline void pack_scale_min_k4(const int* sc, const int* m, uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

// Chooses one 256-element block's header for x = d·sc[j]·q − dmin·m[j], q in 0..levels:
// the offset dmin·m[j] covers the sub-block minimum (or is 0 when that is ≥ 0), and
// d·sc[j] is rounded up so that no element needs q > levels. Writes d and dmin
// (fp16) and the 6-bit sc, m; returns the step d·sc[j] and offset per sub-block.
inline void choose_kquant_header(const float* x, int levels, uint16_t& d16, uint16_t& dmin16, int* sc, int* m,
                                 float* step, float* offset) {
  float lo[8], hi[8], max_neg = 0.0f;
  for (int j = 0; j < 8; ++j) {
    lo[j] = 0.0f;
    hi[j] = -INFINITY;
    for (int i = 0; i < 32; ++i) lo[j] = std::fmin(lo[j], x[32 * j + i]), hi[j] = std::fmax(hi[j], x[32 * j + i]);
    max_neg = std::fmax(max_neg, -lo[j]);
  }
  dmin16 = f16_at_least(max_neg / 63.0f);
  const float dmin = f16_to_f32(dmin16);
  float need[8], max_need = 0.0f;
  for (int j = 0; j < 8; ++j) {
    m[j] = dmin > 0.0f ? std::min(63, static_cast<int>(std::ceil(-lo[j] / dmin))) : 0;
    offset[j] = dmin * static_cast<float>(m[j]);
    need[j] = std::fmax(0.0f, (hi[j] + offset[j]) / static_cast<float>(levels));
    max_need = std::fmax(max_need, need[j]);
  }
  d16 = f16_at_least(max_need / 63.0f);
  const float d = f16_to_f32(d16);
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0.0f ? std::min(63, static_cast<int>(std::ceil(need[j] / d))) : 0;
    step[j] = d * static_cast<float>(sc[j]);
  }
}

}  // namespace nextn
