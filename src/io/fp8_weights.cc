// io/fp8_weights.cc — official FP8 checkpoints (DeepSeek-V3, Qwen3.5/3.6 "-FP8"
// releases): a weight stored F8_E4M3 (e4m3fn: 4 exponent bits, bias 7, 3 mantissa bits,
// no infinities, max 448) with a companion `<name>_scale_inv` of shape
// [ceil(rows / br), ceil(cols / bc)] (F32 in DeepSeek's, BF16 in Qwen's) holding one
// scale per br × bc block (quantization_config.weight_block_size, 128 × 128 when absent).
// Despite the name the scale is multiplied: W[i, j] = fp8(W8[i, j]) · scale_inv[i / br, j / bc]
// (DeepSeek's inference/kernel.py weight_dequant, and fp8_cast_bf16.py, which writes the
// result as BF16). nextn has no FP8 kernel, so each such weight is converted the same way
// at load, to BF16, and the conversion is logged; the scales are dropped. Stacked weights
// (fused experts [E, rows, cols]) are read the same way with a scale grid per matrix
// ([E, ⌈rows / br⌉, ⌈cols / bc⌉]). An F8 tensor
// without a companion stays raw, and reading it is an error naming its dtype.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "io/checkpoint.h"
#include "util/error.h"
#include "util/log.h"

namespace nextn {
namespace {

float e4m3fn_to_float(uint8_t b) {
  const int sign = b >> 7, exponent = (b >> 3) & 15, mantissa = b & 7;
  float v;
  if (exponent == 15 && mantissa == 7) v = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0) v = std::ldexp(float(mantissa) / 8.0f, -6);  // subnormal
  else v = std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
  return sign ? -v : v;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  TensorView t;
  t.shape = shape;
  return t.shape_string();
}

}  // namespace

void Checkpoint::convert_fp8_weights() {
  int64_t br = 128, bc = 128;
  if (config_.contains("quantization_config") && config_["quantization_config"].is_object()) {
    const nlohmann::json& q = config_["quantization_config"];
    if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
      const nlohmann::json& b = q["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
          b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0)
        fail(ErrorKind::kBadInput, "{}/config.json: quantization_config.weight_block_size must be two positive integers, "
             "got {}", dir_, b.dump());
      br = b[0].get<int64_t>();
      bc = b[1].get<int64_t>();
    }
  }
  std::array<float, 256> lut;
  for (int i = 0; i < 256; ++i) lut[size_t(i)] = e4m3fn_to_float(uint8_t(i));
  int converted = 0;
  for (auto it = other_tensors_.begin(); it != other_tensors_.end();) {
    const RawTensor& raw = it->second;
    const TensorView* scale = raw.dtype == "F8_E4M3" ? find(raw.name + "_scale_inv") : nullptr;
    if (!scale) {
      ++it;
      continue;
    }
    // A matrix [rows, cols], or stacked matrices [..., rows, cols] (fused experts) with
    // one grid of scales per matrix.
    if (raw.shape.size() < 2)
      fail(ErrorKind::kBadInput, "{}: FP8 tensor '{}' has shape {}, expected a matrix", raw.file, raw.name,
           shape_text(raw.shape));
    const int64_t rows = raw.shape[raw.shape.size() - 2], cols = raw.shape.back();
    int64_t matrices = 1;
    for (size_t d = 0; d + 2 < raw.shape.size(); ++d) matrices *= raw.shape[d];
    std::vector<int64_t> want(raw.shape.begin(), raw.shape.end() - 2);
    const int64_t grid_rows = (rows + br - 1) / br, grid_cols = (cols + bc - 1) / bc;
    want.push_back(grid_rows);
    want.push_back(grid_cols);
    if (scale->shape != want)
      fail(ErrorKind::kBadInput, "{}: tensor '{}' has shape {}, expected {} ({} × {} blocks of {} weight {})",
           scale->file, scale->name, scale->shape_string(), shape_text(want), br, bc, raw.name,
           shape_text(raw.shape));
    const size_t n = size_t(matrices * rows * cols);
    auto out = std::make_unique<uint8_t[]>(n * 2);
    uint16_t* y = reinterpret_cast<uint16_t*>(out.get());
    const uint8_t* x = static_cast<const uint8_t*>(raw.data);
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t row = m * rows + i;
        for (int64_t j0 = 0; j0 < cols; j0 += bc) {
          const float s = scale->float_at((m * grid_rows + i / br) * grid_cols + j0 / bc);
          for (int64_t j = j0; j < std::min(cols, j0 + bc); ++j)
            y[row * cols + j] = f32_to_bf16(lut[x[row * cols + j]] * s);
        }
      }
    TensorView view;
    view.name = raw.name;
    view.file = raw.file;
    view.dtype = DType::kBF16;
    view.shape = raw.shape;
    view.data = out.get();
    view.nbytes = n * 2;
    owned_.push_back(std::move(out));
    // The scale leaves the listing (sorted: erase keeps the order); the weight joins it.
    const std::string scale_name = scale->name;
    tensors_.erase(std::lower_bound(tensors_.begin(), tensors_.end(), scale_name,
                                    [](const TensorView& t, const std::string& n) { return t.name < n; }));
    tensors_.insert(std::lower_bound(tensors_.begin(), tensors_.end(), view.name,
                                     [](const TensorView& t, const std::string& n) { return t.name < n; }),
                    std::move(view));
    it = other_tensors_.erase(it);
    ++converted;
  }
  if (converted > 0)
    log_info("{}: converted {} FP8 weights (E4M3 with {}×{} block scales, weight_scale_inv) to BF16 at load", dir_,
             converted, br, bc);
}

}  // namespace nextn
