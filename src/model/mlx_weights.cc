// model/mlx_weights.cc — reading MLX affine-quantized modules into format_mlx blocks.
#include "model/mlx_weights.h"

#include <cstring>
#include <vector>

#include "io/checkpoint.h"
#include "io/json_file.h"
#include "kernels/weight_format.h"
#include "util/error.h"

namespace nextn {
namespace {

// The mode of a settings object ("affine" when absent, as older mlx-lm files are).
void check_mode(const nlohmann::json& s, const std::string& where, const std::string& source) {
  if (!s.contains("mode")) return;
  if (!s["mode"].is_string())
    fail(ErrorKind::kBadInput, "{}: {}.mode must be a string", source, where);
  const std::string mode = s["mode"].get<std::string>();
  if (mode != "affine")
    fail(ErrorKind::kBadInput,
         "{}: {}.mode is '{}'; nextn runs MLX affine quantization only (4- and 8-bit, groups 32/64/128)", source, where,
         mode);
}

// settings[key] as a positive integer, or 0 when absent.
int setting(const nlohmann::json& s, const char* key, const std::string& where, const std::string& source) {
  if (!s.contains(key)) return 0;
  const nlohmann::json& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > 1024)
    fail(ErrorKind::kBadInput, "{}: {}.{} must be a positive integer, got {}", source, where, key, json_text(v));
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

MlxQuantization MlxQuantization::from_config(const nlohmann::json& config, const std::string& source) {
  MlxQuantization q;
  if (config.contains("quantization_config") && config["quantization_config"].is_object()) {
    const nlohmann::json& hf = config["quantization_config"];
    // "fp8" (block-scaled E4M3, the official FP8 releases) is converted to BF16 when the
    // checkpoint is opened (io/fp8_weights.cc); an F8 tensor left over is refused when read.
    const bool fp8 = hf.contains("quant_method") && hf["quant_method"] == "fp8";
    if (hf.contains("quant_method") && !fp8) {
      const std::string method = hf["quant_method"].is_string() ? hf["quant_method"].get<std::string>()
                                                                 : json_text(hf["quant_method"]);
      fail(ErrorKind::kBadInput,
           "{}: quantization_config.quant_method '{}' is not supported (nextn runs F32/F16/BF16 safetensors, "
           "MLX affine 4/8-bit safetensors, block-scaled FP8 checkpoints and GGUF files)",
           source, method);
    }
  }
  if (!config.contains("quantization")) return q;
  const nlohmann::json& s = config["quantization"];
  if (!s.is_object()) fail(ErrorKind::kBadInput, "{}: 'quantization' must be an object", source);
  check_mode(s, "quantization", source);
  for (auto it = s.begin(); it != s.end(); ++it)
    if (it.value().is_object()) check_mode(it.value(), "quantization." + it.key(), source);
  q.present = true;
  q.settings = s;
  return q;
}

bool is_mlx_quantized(const Checkpoint& ckpt, const std::string& prefix) { return ckpt.has(prefix + ".scales"); }

DType mlx_matrix_dtype(const Checkpoint& ckpt, const MlxQuantization& q, const std::string& prefix, int64_t rows,
                       int64_t cols) {
  const std::string wname = prefix + ".weight", sname = prefix + ".scales", bname = prefix + ".biases";
  const RawTensor* w = ckpt.find_raw(wname);
  if (!w) {
    const TensorView* fw = ckpt.find(wname);
    if (fw) fail(ErrorKind::kBadInput, "{}: tensor '{}' is {} but '{}' exists; MLX-quantized weights are U32", fw->file,
                 wname, dtype_name(fw->dtype), sname);
    fail(ErrorKind::kBadInput, "{}: missing tensor '{}'", ckpt.tensor_source(), wname);
  }
  if (w->dtype != "U32")
    fail(ErrorKind::kBadInput, "{}: tensor '{}' has dtype {}, expected U32 (MLX packed values)", w->file, wname,
         w->dtype);
  const TensorView* s = ckpt.find(sname);
  const TensorView* b = ckpt.find(bname);
  if (!s) fail(ErrorKind::kBadInput, "{}: tensor '{}' must be F32, F16 or BF16", ckpt.tensor_source(), sname);
  if (!b) fail(ErrorKind::kBadInput, "{}: tensor '{}' is missing (MLX affine quantization stores scales and biases)",
               ckpt.tensor_source(), bname);
  if (w->shape.size() != 2 || w->shape[0] != rows || w->shape[1] <= 0 || w->shape[1] > cols ||
      (w->shape[1] * 32) % cols != 0)
    fail(ErrorKind::kBadInput, "{}: tensor '{}' has shape {}, expected [{}, {}·bits/32]", w->file, wname,
         TensorView{"", "", DType::kF32, w->shape}.shape_string(), rows, cols);
  const int64_t bits = w->shape[1] * 32 / cols;
  if (s->shape.size() != 2 || s->shape[0] != rows || s->shape[1] <= 0 || cols % s->shape[1] != 0)
    fail(ErrorKind::kBadInput, "{}: tensor '{}' has shape {}, expected [{}, {}/group_size]", s->file, sname,
         s->shape_string(), rows, cols);
  if (b->shape != s->shape)
    fail(ErrorKind::kBadInput, "{}: tensor '{}' has shape {}, expected {} like '{}'", b->file, bname, b->shape_string(),
         s->shape_string(), sname);
  const int64_t group = cols / s->shape[1];

  if (q.present) {  // the shapes must say what the config says
    const nlohmann::json* own = q.settings.contains(prefix) ? &q.settings[prefix] : nullptr;
    if (own && own->is_boolean() && !own->get<bool>())
      fail(ErrorKind::kBadInput, "{}: config.json says module '{}' is not quantized, but '{}' exists", ckpt.dir(), prefix,
           sname);
    const nlohmann::json& at = own && own->is_object() ? *own : q.settings;
    const std::string where = own && own->is_object() ? "quantization." + prefix : "quantization";
    const int want_bits = setting(at, "bits", where, ckpt.dir() + "/config.json");
    const int want_group = setting(at, "group_size", where, ckpt.dir() + "/config.json");
    if ((want_bits && want_bits != bits) || (want_group && want_group != group))
      fail(ErrorKind::kBadInput,
           "{}: tensors of '{}' hold {}-bit values in groups of {}, but config.json {} says bits {}, group_size {}",
           w->file, prefix, bits, group, where, want_bits, want_group);
  }
  DType dtype;
  if (!dtype_from_mlx(static_cast<int>(bits), static_cast<int>(group), dtype))
    fail(ErrorKind::kBadInput,
         "{}: '{}' is MLX {}-bit with group size {}; nextn runs MLX affine 4- and 8-bit with groups of 32, 64 or 128",
         w->file, prefix, bits, group);
  return dtype;
}

void repack_mlx_matrix(const Checkpoint& ckpt, const std::string& prefix, DType dtype, int64_t rows, int64_t cols,
                       void* out) {
  const RawTensor& w = *ckpt.find_raw(prefix + ".weight");
  const TensorView& s = *ckpt.find(prefix + ".scales");
  const TensorView& b = *ckpt.find(prefix + ".biases");
  const DTypeInfo& info = dtype_info(dtype);
  const int group = info.block_elems;
  const int bits = (info.block_bytes - 8) * 8 / group;
  const int64_t groups = cols / group, words_per_row = w.shape[1], words_per_group = group * bits / 32;
  // Safetensors data is little-endian and need not be 4-byte aligned: copy the words out.
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = static_cast<uint8_t*>(out);
  std::vector<uint32_t> packed(static_cast<size_t>(words_per_group));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      std::memcpy(packed.data(), bytes + 4 * (r * words_per_row + g * words_per_group), packed.size() * 4);
      repack_mlx_group(bits, group, packed.data(), s.float_at(r * groups + g), b.float_at(r * groups + g),
                       dst + (r * groups + g) * info.block_bytes);
    }
  }
}

}  // namespace nextn
