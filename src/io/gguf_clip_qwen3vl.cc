// io/gguf_clip_qwen3vl.cc — the Qwen3.5 / Qwen3.6 vision tower in llama.cpp's vision
// projector GGUF (mmproj-*.gguf beside a text GGUF), as its converter writes it
// (general.architecture "clip", clip.projector_type "qwen3vl_merger"; reading only):
//   - names: v.patch_embd.{weight,weight.1,bias}, v.position_embd.weight,
//     v.blk.{i}.{ln1,ln2,attn_qkv,attn_out,ffn_up,ffn_down}.{weight,bias},
//     v.post_ln.{weight,bias} (the merger's norm), mm.0 / mm.2 (the merger's fc1 / fc2);
//   - the Conv3d patch embedding [D, 3, 2, p, p] split along time into two Conv2d weights
//     [D, 3, p, p] (.weight = frame 0, .weight.1 = frame 1): joined back here;
//   - metadata: clip.vision.{block_count, embedding_length, feed_forward_length,
//     attention.head_count, attention.layer_norm_epsilon, patch_size, spatial_merge_size,
//     projection_dim (the language model's width), image_mean, image_std}; the position
//     table's side comes from its tensor. DeepStack layers (Qwen3-VL,
//     clip.vision.is_deepstack_layers) are refused, as for Hugging Face checkpoints.
// The result reads as a Hugging Face checkpoint holding only model.visual.* and a
// config.json with vision_config (and the processor's mean/std as preprocessor_config).
#include <cmath>
#include <cstring>
#include <regex>

#include "io/gguf_dialect.h"
#include "util/error.h"

namespace nextn {
namespace {

const std::pair<const char*, const char*> kFixedNames[] = {
    {"v.patch_embd.bias", "model.visual.patch_embed.proj.bias"},
    {"v.position_embd.weight", "model.visual.pos_embed.weight"},
    {"v.post_ln.weight", "model.visual.merger.norm.weight"},
    {"v.post_ln.bias", "model.visual.merger.norm.bias"},
    {"mm.0.weight", "model.visual.merger.linear_fc1.weight"},
    {"mm.0.bias", "model.visual.merger.linear_fc1.bias"},
    {"mm.2.weight", "model.visual.merger.linear_fc2.weight"},
    {"mm.2.bias", "model.visual.merger.linear_fc2.bias"},
};

// Per block: the GGUF part after v.blk.{i}. → the Hugging Face part after blocks.{i}.
const std::pair<const char*, const char*> kBlockNames[] = {
    {"ln1", "norm1"},           {"ln2", "norm2"},         {"attn_qkv", "attn.qkv"},
    {"attn_out", "attn.proj"},  {"ffn_up", "mlp.linear_fc1"}, {"ffn_down", "mlp.linear_fc2"},
};

class ClipQwen3VLDialect : public GgufDialect {
 public:
  std::string arch() const override { return "clip:qwen3vl_merger"; }
  bool writes(const std::string&) const override { return false; }

  std::string hf_name(const std::string& g) const override {
    for (const auto& [gguf, hf] : kFixedNames)
      if (g == gguf) return hf;
    static const std::regex block(R"(v\.blk\.(\d+)\.([a-z_0-9]+)\.(weight|bias))");
    std::smatch m;
    if (std::regex_match(g, m, block))
      for (const auto& [gguf, hf] : kBlockNames)
        if (m[2].str() == gguf) return "model.visual.blocks." + m[1].str() + "." + hf + "." + m[3].str();
    return "";  // v.patch_embd.weight(.1): joined(); anything else is not read
  }
  std::string gguf_name(const std::string& h) const override {
    for (const auto& [gguf, hf] : kFixedNames)
      if (h == hf) return gguf;
    return "";
  }

  std::vector<TensorView> joined(const std::map<std::string, const TensorView*>& tensors, const GgufMetadata& md,
                                 std::vector<std::unique_ptr<uint8_t[]>>& owned) const override {
    const auto f0 = tensors.find("v.patch_embd.weight"), f1 = tensors.find("v.patch_embd.weight.1");
    if (f0 == tensors.end() || f1 == tensors.end())
      fail(ErrorKind::kBadInput, "{}: the patch embedding needs both v.patch_embd.weight and v.patch_embd.weight.1",
           md.path());
    const TensorView& a = *f0->second;
    const TensorView& b = *f1->second;
    if (a.shape.size() != 4 || a.shape != b.shape || a.dtype != b.dtype || a.shape[1] != 3)
      fail(ErrorKind::kBadInput, "{}: v.patch_embd.weight {} and .weight.1 {} must be two [D, 3, p, p] of one type",
           md.path(), a.shape_string(), b.shape_string());
    if (a.dtype != DType::kF32 && a.dtype != DType::kF16 && a.dtype != DType::kBF16)
      fail(ErrorKind::kUnsupported, "{}: v.patch_embd.weight must be F32, F16 or BF16 to be joined", md.path());
    // [D, 3, p, p] × 2 frames → [D, 3, 2, p, p]: per output row and channel, frame 0's
    // p² values then frame 1's.
    const size_t plane = size_t(a.shape[2] * a.shape[3]) * dtype_size(a.dtype);
    const int64_t planes = a.shape[0] * a.shape[1];
    owned.push_back(std::make_unique<uint8_t[]>(size_t(planes) * 2 * plane));
    uint8_t* out = owned.back().get();
    for (int64_t i = 0; i < planes; ++i) {
      std::memcpy(out + size_t(2 * i) * plane, static_cast<const uint8_t*>(a.data) + size_t(i) * plane, plane);
      std::memcpy(out + size_t(2 * i + 1) * plane, static_cast<const uint8_t*>(b.data) + size_t(i) * plane, plane);
    }
    TensorView view = a;
    view.name = "model.visual.patch_embed.proj.weight";
    view.shape = {a.shape[0], 3, 2, a.shape[2], a.shape[3]};
    view.data = out;
    view.nbytes = size_t(planes) * 2 * plane;
    return {view};
  }

  nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors) const override {
    const nlohmann::json& kv = md.all();
    if (kv.contains("clip.vision.is_deepstack_layers") && kv["clip.vision.is_deepstack_layers"].is_array())
      for (const nlohmann::json& flag : kv["clip.vision.is_deepstack_layers"])
        if (flag.is_boolean() && flag.get<bool>())
          fail(ErrorKind::kUnsupported, "{}: DeepStack layers (Qwen3-VL) are not supported", md.path());
    const auto table = tensors.find("v.position_embd.weight");
    if (table == tensors.end() || table->second->shape.size() != 2)
      fail(ErrorKind::kBadInput, "{}: v.position_embd.weight [positions, D] is missing", md.path());
    nlohmann::json v;
    v["depth"] = md.integer("vision.block_count");
    v["hidden_size"] = md.integer("vision.embedding_length");
    v["intermediate_size"] = md.integer("vision.feed_forward_length");
    v["num_heads"] = md.integer("vision.attention.head_count");
    v["patch_size"] = md.integer("vision.patch_size");
    v["spatial_merge_size"] = md.integer("vision.spatial_merge_size", 2);
    v["temporal_patch_size"] = 2;  // the converter refuses any other
    v["out_hidden_size"] = md.integer("vision.projection_dim");
    v["num_position_embeddings"] = table->second->shape[0];
    v["hidden_act"] = "gelu_pytorch_tanh";
    nlohmann::json c;
    c["architectures"] = {"Qwen3_5VisionModel"};
    c["vision_config"] = v;
    if (md.has("vision.image_mean") && md.has("vision.image_std"))
      c["preprocessor_config"] = {{"image_mean", md.numbers("vision.image_mean")},
                                  {"image_std", md.numbers("vision.image_std")}};
    return c;
  }

  void write_metadata(const nlohmann::json&, GgufWriter&) const override {}
};

}  // namespace

const GgufDialect& gguf_clip_qwen3vl_dialect() {
  static const ClipQwen3VLDialect dialect;
  return dialect;
}

}  // namespace nextn
