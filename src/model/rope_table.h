// model/rope_table.h — RoPE inverse frequencies, including llama3 / linear scaling, and
// the partial (first rotary_dim dims) rotation.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace nextn {

// head_dim / 2 entries: 1 / theta^(2i / head_dim), rescaled per `scaling`.
std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& scaling);

// NeoX rotation of dims [0, rotary_dim) of every head of x [n_rows, heads * head_dim], in
// place, pairs (j, j + rotary_dim / 2); the other dims pass through (partial rotary:
// Qwen3.5, GLM-4.5). inv_freq has rotary_dim / 2 entries.
void partial_rope(float* x, int n_rows, int heads, int head_dim, int rotary_dim, const int32_t* positions,
                  const float* inv_freq);

// M-RoPE: as partial_rope, but frequency slot i (< rotary_dim / 2) takes its position from
// axis slot_axis[i] of the row's (t, h, w) triple: axes [n_rows, 3].
void partial_mrope(float* x, int n_rows, int heads, int head_dim, int rotary_dim, const int32_t* axes,
                   const float* inv_freq, const int8_t* slot_axis);

}  // namespace nextn
