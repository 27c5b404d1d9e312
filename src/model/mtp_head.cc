// model/mtp_head.cc — MTP layers (MiMo, DeepSeek and Qwen3.5 layouts) from the target
// checkpoint or from an assistant checkpoint, and their forward:
//   MiMo:     u = input_proj([hidden_layernorm(h); token_layernorm(e)]), out = final_layernorm(block(u))
//   DeepSeek: u = eh_proj([enorm(e); hnorm(h)]),                         out = shared_head.norm(block(u))
//   Qwen3.5:  u = mtp.fc([pre_fc_norm_embedding(e); pre_fc_norm_hidden(h)]), out = mtp.norm(block(u)),
//             block = a gated attention layer mtp.layers.{i}, every norm (1 + w)
// logits = lm_head(out) (DeepSeek: shared_head.head when present); `out` is the recycled h.
// Where each layout keeps these tensors is data (ModelConfig::mtp_names, filled by the
// architecture), so the code below is the same for every layout.
#include "model/mtp_head.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "io/checkpoint.h"
#include "model/architecture.h"
#include "model/decoder_model.h"
#include "model/rope_table.h"
#include "util/error.h"

namespace nextn {
namespace {

// A name pattern with its "{i}" replaced by the layer's tensor index.
std::string with_index(const std::string& pattern, const std::string& index) {
  const size_t at = pattern.find("{i}");
  return at == std::string::npos ? pattern : pattern.substr(0, at) + index + pattern.substr(at + 3);
}

struct MtpLayerWeights {
  const float* hidden_norm = nullptr;  // hidden_layernorm / hnorm
  const float* token_norm = nullptr;   // token_layernorm / enorm
  Linear proj;                         // input_proj / eh_proj: [H, 2H]
  std::unique_ptr<Block> block;
  const float* out_norm = nullptr;     // final_layernorm / shared_head.norm
  WeightMatrix head;                   // target lm_head or shared_head.head
};

class MtpHeadImpl : public MtpHead {
 public:
  MtpHeadImpl(const MtpHeadConfig& spec, const DecoderModel& target, WeightStore& store, std::shared_ptr<void> keep_alive)
      : spec_(spec), target_(target), keep_alive_(std::move(keep_alive)) {
    const int64_t H = spec.block.hidden;
    const MtpNames& m = spec.names;
    // Qwen3.5's (1 + w) norms; the flat assistant form has no config and plain norms.
    const float off = spec.config ? spec.config->norm_offset : 0.0f;
    for (int i = 0; i < spec.num_layers; ++i) {
      const std::string index = std::to_string(spec.first_index + i);
      const std::string head = with_index(m.head, index), p = with_index(m.block, index);
      MtpLayerWeights w;
      w.hidden_norm = store.floats(head + m.hidden_norm, {H}, off);
      w.token_norm = store.floats(head + m.token_norm, {H}, off);
      w.proj = store.linear(head + m.proj, H, 2 * H, store.has(head + m.proj + ".bias"));
      w.out_norm = store.floats(head + m.out_norm, {H}, off);
      w.head = !m.shared_head.empty() && store.has(head + m.shared_head)
                   ? store.matrix(head + m.shared_head, target.config().vocab_size, H)
                   : target.lm_head();
      // The layer is one of the trunk's kind: the family's own block where it has one
      // (Qwen3.5's gated attention), else the shared attention block shaped as the
      // trunk's (partial rotary, routed MLP: GLM-4.5); a flat assistant checkpoint: the
      // flat shape.
      if (spec.config && spec.arch && spec.arch->make_block)
        w.block = spec.arch->make_block(*spec.config, spec.layer, store, p);
      else if (spec.config)
        w.block = make_attention_block(*spec.config, spec.layer, store, p);
      else
        w.block = make_attention_block(store, p, spec.block, spec.inv_freq);
      layers_.push_back(std::move(w));
    }
  }

  int num_layers() const override { return spec_.num_layers; }
  MtpLayout layout() const override { return spec_.layout; }
  int input_width() const override { return spec_.block.hidden; }

  std::unique_ptr<SequenceState> new_state(int max_tokens, const KvOptions& options) const override {
    LayerStateSpec layer;
    layer.heads = spec_.block.heads;
    layer.kv_heads = spec_.block.kv_heads;
    layer.head_dim = spec_.block.head_dim;
    return std::make_unique<SequenceState>(std::vector<LayerStateSpec>(size_t(spec_.num_layers), layer), max_tokens,
                                           options);
  }

  WeightMatrix output_head(int layer) const override { return layers_.at(size_t(layer)).head; }

  void forward(int layer, std::span<const MtpRows> sequences, std::vector<float>& logits,
               std::vector<float>& hidden_out, int vocab_rows) override {
    if (layer < 0 || layer >= spec_.num_layers)
      fail(ErrorKind::kInternal, "MTP layer {} out of range (head has {})", layer, spec_.num_layers);
    const MtpLayerWeights& w = layers_[layer];
    const int64_t H = spec_.block.hidden;
    WeightMatrix head = w.head;
    if (vocab_rows > 0) head.rows = std::min<int64_t>(head.rows, vocab_rows);
    const int64_t V = head.rows;
    // Lay the rows of every sequence one after another.
    int n = 0, n_logits = 0;
    segments_.clear();
    for (const MtpRows& seq : sequences) {
      const int rows = static_cast<int>(seq.tokens.size());
      const int pos = seq.state->length();
      if (pos + rows > seq.state->max_tokens())
        fail(ErrorKind::kResource, "MTP context is full: {} + {} tokens exceed the KV cache capacity of {}", pos,
             rows, seq.state->max_tokens());
      for (int r : seq.logit_rows)
        if (r < 0 || r >= rows) fail(ErrorKind::kInternal, "MTP forward: logit row {} out of range (0..{})", r, rows - 1);
      if (rows > 0) segments_.push_back({seq.state, n, rows, pos, false});
      n += rows;
      n_logits += static_cast<int>(seq.logit_rows.size());
    }
    if (n == 0) {
      logits.resize(size_t(n_logits) * V);
      hidden_out.clear();
      return;
    }
    grow(e_, n * H);
    grow(hn_, n * H);
    grow(cat_, n * 2 * H);
    grow(u_, n * H);
    if (positions_.size() < size_t(n)) positions_.resize(n), tokens_.resize(n);
    {
      int row = 0;
      for (const MtpRows& seq : sequences) {
        const int pos = seq.state->length();
        for (size_t i = 0; i < seq.tokens.size(); ++i, ++row) {
          positions_[row] = pos + static_cast<int>(i);
          tokens_[row] = seq.tokens[i];
        }
      }
    }
    embed_rows(target_.embedding(), tokens_.data(), n, e_.data());
    for (const StateSegment& seg : segments_)
      if (seg.pos == 0) std::fill_n(e_.data() + size_t(seg.row0) * H, H, 0.0f);  // position-0 mask (vLLM)
    const float eps = spec_.block.eps;
    rms_norm(e_.data(), w.token_norm, n, H, eps, e_.data());
    // Each `hidden` is consumed here, before the outputs are resized: it may live in hidden_out.
    for (size_t s = 0, row = 0; s < sequences.size(); row += sequences[s].tokens.size(), ++s)
      if (!sequences[s].tokens.empty())
        rms_norm(sequences[s].hidden, w.hidden_norm, int64_t(sequences[s].tokens.size()), H, eps,
                 hn_.data() + row * size_t(H));
    logits.resize(size_t(n_logits) * V);
    hidden_out.resize(size_t(n) * H);
    const bool hidden_first = spec_.names.hidden_first;  // MiMo [h; e]; DeepSeek, Qwen3.5: [e; h]
    for (int r = 0; r < n; ++r) {
      float* row = cat_.data() + size_t(r) * 2 * H;
      std::memcpy(row + (hidden_first ? 0 : H), hn_.data() + size_t(r) * H, H * sizeof(float));
      std::memcpy(row + (hidden_first ? H : 0), e_.data() + size_t(r) * H, H * sizeof(float));
    }
    apply(w.proj, cat_.data(), n, u_.data());
    for (const StateSegment& seg : segments_) seg.state->begin_rows(seg.n, false);
    w.block->forward(layer, BlockRows{u_.data(), n, positions_.data(), segments_}, scratch_);
    for (const StateSegment& seg : segments_) seg.state->end_rows();
    rms_norm(u_.data(), w.out_norm, n, H, eps, hidden_out.data());

    if (n_logits > 0) {
      grow(gathered_, size_t(n_logits) * H);
      size_t out = 0, row0 = 0;
      for (const MtpRows& seq : sequences) {
        for (int r : seq.logit_rows)
          std::memcpy(gathered_.data() + (out++) * H, hidden_out.data() + (row0 + size_t(r)) * H, H * sizeof(float));
        row0 += seq.tokens.size();
      }
      matmul(head, gathered_.data(), n_logits, logits.data());
    }
  }

 private:
  static void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  }

  MtpHeadConfig spec_;
  const DecoderModel& target_;
  std::shared_ptr<void> keep_alive_;
  std::vector<MtpLayerWeights> layers_;
  BlockScratch scratch_;
  std::vector<float> e_, hn_, cat_, u_, gathered_;
  std::vector<int32_t> positions_, tokens_;
  std::vector<StateSegment> segments_;
};

// What backs an assistant head's weights (destroyed store-first; the config the split
// form's layers point to outlives them).
struct AssistantResources {
  std::unique_ptr<ModelConfig> config;
  std::unique_ptr<Checkpoint> ckpt;
  std::unique_ptr<WeightStore> store;
};

// The split form: a checkpoint of the target's own kind of architecture whose MTP layers
// are all it needs to hold (llama.cpp's `mtp-` GGUF, written by its converter's --mtp
// beside a --no-mtp trunk: the MTP block at blk.{n_layer + i} plus copies of the
// embedding, final norm and output; or a safetensors directory holding the MTP tensors
// under the names the full checkpoint uses). Its layers are bound exactly as the full
// checkpoint's head would be; the embedding and output head stay the target's.
std::unique_ptr<MtpHead> load_split_head(std::shared_ptr<AssistantResources> res, const std::string& dir,
                                         DecoderModel& target) {
  res->config = std::make_unique<ModelConfig>(parse_model_config(*res->ckpt));
  const ModelConfig& c = *res->config;
  const ModelConfig& tc = target.config();
  if (c.mtp_layout == MtpLayout::kNone || c.num_mtp_layers <= 0)
    fail(ErrorKind::kBadInput,
         "{}: holds no MTP layers ({} without MTP tensors; an MTP drafter is an MTP-only checkpoint of the target's "
         "architecture, such as llama.cpp's mtp- GGUF, or architectures ['NextnMTPAssistant'])",
         dir, c.architecture);
  if (c.hidden_size != tc.hidden_size)
    fail(ErrorKind::kBadInput, "{}: hidden_size {} does not match the target model's hidden_size {} ({})", dir,
         c.hidden_size, tc.hidden_size, target.dir());
  if (c.vocab_size != tc.vocab_size)
    fail(ErrorKind::kBadInput, "{}: vocab_size {} does not match the target model's vocab_size {} ({})", dir,
         c.vocab_size, tc.vocab_size, target.dir());
  res->store = std::make_unique<WeightStore>(*res->ckpt, target.copy_weights());
  WeightStore& store = *res->store;
  return make_mtp_head(mtp_head_spec(c), target, store, std::move(res));
}

}  // namespace

MtpHeadConfig mtp_head_spec(const ModelConfig& c) {
  MtpHeadConfig spec;
  spec.layout = c.mtp_layout;
  spec.num_layers = c.num_mtp_layers;
  spec.names = c.mtp_names;
  spec.first_index = c.mtp_names.after_trunk ? c.num_layers : 0;
  spec.block = flat_block_shape(c);  // MiMo / DeepSeek layers of a uniform trunk
  spec.inv_freq = rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
  spec.config = &c;
  spec.arch = &architecture_named(c.architecture);
  for (const LayerSpec& l : c.layers)
    if (l.mixer == MixerKind::kAttention) spec.layer = l;  // the MTP layer is full attention, as the trunk's
  // ... and its MLP is routed when the trunk's is (qwen3_5_moe's MTP layer has experts).
  for (const LayerSpec& l : c.layers)
    if (l.mlp.routed()) spec.layer.mlp = l.mlp;
  return spec;
}

std::unique_ptr<MtpHead> make_mtp_head(const MtpHeadConfig& spec, const DecoderModel& target, WeightStore& store,
                                       std::shared_ptr<void> keep_alive) {
  return std::make_unique<MtpHeadImpl>(spec, target, store, std::move(keep_alive));
}

std::unique_ptr<MtpHead> MtpHead::load_assistant(const std::string& dir, Model& target_model) {
  auto* target = dynamic_cast<DecoderModel*>(&target_model);
  if (!target) fail(ErrorKind::kInternal, "load_assistant: unsupported target model type");
  auto res = std::make_shared<AssistantResources>();
  res->ckpt = Checkpoint::open(dir);
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  ConfigReader reader(res->ckpt->config(), path);

  std::string arch;
  if (reader.has("architectures") && reader.json()["architectures"].is_array() &&
      !reader.json()["architectures"].empty() && reader.json()["architectures"][0].is_string())
    arch = reader.json()["architectures"][0].get<std::string>();
  if (arch != "NextnMTPAssistant" && reader.get_string("model_type", "") != "mtp_assistant")
    return load_split_head(std::move(res), dir, *target);

  MtpHeadConfig spec;
  const std::string layout = reader.get_string("mtp_layout", "");
  if (layout == "mimo") spec.layout = MtpLayout::kMiMo, spec.names = mimo_mtp_names();
  else if (layout == "deepseek") spec.layout = MtpLayout::kDeepSeek, spec.names = deepseek_mtp_names();
  else if (layout.empty()) reader.error(ErrorKind::kBadInput, "missing key 'mtp_layout'");
  else reader.error(ErrorKind::kUnsupported, "unsupported mtp_layout '{}' (supported: mimo, deepseek)", layout);

  const ModelConfig& tc = target->config();
  const int hidden = reader.require_int("hidden_size");
  const int vocab = reader.require_int("vocab_size");
  if (hidden != tc.hidden_size)
    reader.error(ErrorKind::kBadInput, "hidden_size {} does not match the target model's hidden_size {} ({})", hidden,
                 tc.hidden_size, target->dir());
  if (vocab != tc.vocab_size)
    reader.error(ErrorKind::kBadInput, "vocab_size {} does not match the target model's vocab_size {} ({})", vocab,
                 tc.vocab_size, target->dir());
  spec.num_layers = reader.require_int("num_nextn_predict_layers");
  if (spec.num_layers <= 0) reader.error(ErrorKind::kBadInput, "num_nextn_predict_layers must be positive");
  spec.first_index = 0;
  BlockShape& b = spec.block;
  b.hidden = hidden;
  b.heads = reader.require_int("num_attention_heads");
  b.kv_heads = reader.get_int("num_key_value_heads", b.heads);
  if (b.heads <= 0 || b.kv_heads <= 0 || b.heads % b.kv_heads != 0)
    reader.error(ErrorKind::kBadInput, "num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})",
                 b.heads, b.kv_heads);
  b.head_dim = reader.get_int("head_dim", hidden / b.heads);
  if (b.head_dim <= 0 || b.head_dim % 2 != 0)
    reader.error(ErrorKind::kBadInput, "head_dim must be positive and even, got {}", b.head_dim);
  b.intermediate = reader.require_int("intermediate_size");
  if (b.intermediate <= 0) reader.error(ErrorKind::kBadInput, "key 'intermediate_size' must be positive");
  b.qkv_bias = reader.get_bool("attention_bias", false);
  b.qk_norm = reader.get_bool("qk_norm", false);
  b.eps = static_cast<float>(reader.get_double("rms_norm_eps", 1e-6));
  ModelConfig rope;
  parse_rope_scaling(reader, rope);
  spec.inv_freq = rope_inv_freq(b.head_dim, rope_parameter(reader, "rope_theta", 10000.0), rope.rope_scaling);

  res->store = std::make_unique<WeightStore>(*res->ckpt, target->copy_weights());
  WeightStore& store = *res->store;
  return make_mtp_head(spec, *target, store, std::move(res));
}

}  // namespace nextn
