// io/gguf_clip_gemma4v.cc — the Gemma 4 vision tower in llama.cpp's vision projector GGUF
// (mmproj-*.gguf beside a gemma4 text GGUF), as its converter writes it
// (general.architecture "clip", clip.vision.projector_type "gemma4v"; reading only):
//   - names: v.patch_embd.weight, v.position_embd.weight (F32, [2, positions, D]),
//     v.blk.{i}.{ln1, attn_q, attn_k, attn_v, attn_out, attn_q_norm, attn_k_norm,
//     attn_post_norm, ln2, ffn_gate, ffn_up, ffn_down, ffn_post_norm}.weight, the clipped
//     linears' scalars as v.blk.{i}.<linear>.{input,output}_{min,max} (1-element),
//     v.std_bias / v.std_scale (standardize) and mm.input_projection.weight (embed_vision);
//   - the patch embedding [D, 3·p²] in (y, x, channel) order stored as a Conv2d weight
//     [D, 3, p, p]: permuted back here;
//   - metadata: clip.vision.{block_count, embedding_length, feed_forward_length,
//     attention.head_count, attention.layer_norm_epsilon, patch_size,
//     projector.scale_factor (the pooling kernel, 3 when absent)}; the head size, the
//     position table's length and the language model's width come from the tensors.
// The result reads as a Hugging Face Gemma 4 checkpoint holding only the tower
// (model.vision_tower.*, model.embed_vision.*) with its vision_config.
#include <cstring>
#include <regex>

#include "io/gguf_dialect.h"
#include "util/error.h"

namespace nextn {
namespace {

const std::pair<const char*, const char*> kFixedNames[] = {
    {"v.patch_embd.weight", "model.vision_tower.patch_embedder.input_proj.weight"},
    {"v.position_embd.weight", "model.vision_tower.patch_embedder.position_embedding_table"},
    {"v.std_bias", "model.vision_tower.std_bias"},
    {"v.std_scale", "model.vision_tower.std_scale"},
    {"mm.input_projection.weight", "model.embed_vision.embedding_projection.weight"},
};

// Per layer: the GGUF part after v.blk.{i}. → the Hugging Face part after layers.{i}.
// Linears carry ".linear" in Hugging Face names (the clippable wrapper).
struct BlockName {
  const char* gguf;
  const char* hf;
  bool linear;
};
const BlockName kBlockNames[] = {
    {"ln1", "input_layernorm", false},
    {"attn_q", "self_attn.q_proj", true},
    {"attn_k", "self_attn.k_proj", true},
    {"attn_v", "self_attn.v_proj", true},
    {"attn_out", "self_attn.o_proj", true},
    {"attn_q_norm", "self_attn.q_norm", false},
    {"attn_k_norm", "self_attn.k_norm", false},
    {"attn_post_norm", "post_attention_layernorm", false},
    {"ln2", "pre_feedforward_layernorm", false},
    {"ffn_post_norm", "post_feedforward_layernorm", false},
    {"ffn_gate", "mlp.gate_proj", true},
    {"ffn_up", "mlp.up_proj", true},
    {"ffn_down", "mlp.down_proj", true},
};

class ClipGemma4VDialect : public GgufDialect {
 public:
  std::string arch() const override { return "clip:gemma4v"; }
  bool writes(const std::string&) const override { return false; }

  std::string hf_name(const std::string& g) const override {
    for (const auto& [gguf, hf] : kFixedNames)
      if (g == gguf) return hf;
    static const std::regex block(R"(v\.blk\.(\d+)\.([a-z_0-9]+)\.(weight|input_min|input_max|output_min|output_max))");
    std::smatch m;
    if (!std::regex_match(g, m, block)) return "";
    for (const BlockName& b : kBlockNames)
      if (m[2].str() == b.gguf) {
        const std::string base = "model.vision_tower.encoder.layers." + m[1].str() + "." + b.hf;
        if (m[3].str() != "weight") return b.linear ? base + "." + m[3].str() : "";
        return base + (b.linear ? ".linear.weight" : ".weight");
      }
    return "";
  }
  std::string gguf_name(const std::string& h) const override {
    for (const auto& [gguf, hf] : kFixedNames)
      if (h == hf) return gguf;
    return "";
  }

  TensorView read_tensor(const TensorView& t, const std::string& hf, const GgufMetadata& md,
                         std::vector<std::unique_ptr<uint8_t[]>>& owned) const override {
    TensorView view = t;
    view.name = hf;
    if (t.name != "v.patch_embd.weight") return view;
    // Conv2d [D, 3, p, p] → the Linear [D, p·p·3] it came from: (channel, y, x) → (y, x, channel).
    if (t.shape.size() != 4 || t.shape[1] != 3 || t.shape[2] != t.shape[3])
      fail(ErrorKind::kBadInput, "{}: v.patch_embd.weight must be [D, 3, p, p], got {}", md.path(), t.shape_string());
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
      fail(ErrorKind::kUnsupported, "{}: v.patch_embd.weight must be F32, F16 or BF16 to be reordered", md.path());
    const int64_t D = t.shape[0], p = t.shape[2];
    const size_t e = dtype_size(t.dtype);
    owned.push_back(std::make_unique<uint8_t[]>(t.nbytes));
    uint8_t* out = owned.back().get();
    const auto* in = static_cast<const uint8_t*>(t.data);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t y = 0; y < p; ++y)
          for (int64_t x = 0; x < p; ++x)
            std::memcpy(out + size_t(((d * p + y) * p + x) * 3 + ch) * e,
                        in + size_t(((d * 3 + ch) * p + y) * p + x) * e, e);
    view.data = out;
    view.shape = {D, 3 * p * p};
    return view;
  }

  nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors) const override {
    auto shape_of = [&](const char* name, size_t rank) -> const std::vector<int64_t>& {
      const auto it = tensors.find(name);
      if (it == tensors.end() || it->second->shape.size() != rank)
        fail(ErrorKind::kBadInput, "{}: tensor '{}' ({}-D) is missing", md.path(), name, rank);
      return it->second->shape;
    };
    const int64_t heads = md.integer("vision.attention.head_count");
    nlohmann::json v;
    v["model_type"] = "gemma4_vision";
    v["num_hidden_layers"] = md.integer("vision.block_count");
    v["hidden_size"] = md.integer("vision.embedding_length");
    v["intermediate_size"] = md.integer("vision.feed_forward_length");
    v["num_attention_heads"] = heads;
    v["num_key_value_heads"] = heads;
    v["head_dim"] = shape_of("v.blk.0.attn_q_norm.weight", 1)[0];
    v["patch_size"] = md.integer("vision.patch_size");
    v["pooling_kernel_size"] = md.integer("vision.projector.scale_factor", 3);
    v["position_embedding_size"] = shape_of("v.position_embd.weight", 3)[1];
    v["rms_norm_eps"] = md.number("vision.attention.layer_norm_epsilon", 1e-6);
    v["standardize"] = tensors.count("v.std_bias") > 0;
    v["use_clipped_linears"] = tensors.count("v.blk.0.attn_q.input_min") > 0;
    nlohmann::json c;
    c["architectures"] = {"Gemma4VisionModel"};
    c["vision_config"] = v;
    c["text_config"] = {{"hidden_size", shape_of("mm.input_projection.weight", 2)[0]}};
    return c;
  }

  void write_metadata(const nlohmann::json&, GgufWriter&) const override {}
};

}  // namespace

const GgufDialect& gguf_clip_gemma4v_dialect() {
  static const ClipGemma4VDialect dialect;
  return dialect;
}

}  // namespace nextn
