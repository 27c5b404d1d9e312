// model/rope_table.h — RoPE inverse frequencies, including llama3 / linear scaling.
#pragma once
#include <vector>

#include "model/config.h"

namespace nextn {

// head_dim / 2 entries: 1 / theta^(2i / head_dim), rescaled per `scaling`.
std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& scaling);

}  // namespace nextn
