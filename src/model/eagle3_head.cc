// model/eagle3_head.cc — EAGLE-3 drafters (one Llama layer reading three of the target's
// layer inputs), as an MtpHead so they draft through the same batched MTP path:
//   f_p = [S[a]_p ; S[b]_p ; S[c]_p]                 target residual streams (inputs of layers a < b < c)
//   g_p = W_fc · (RMS(f_p; input_norm) if norm_before_fc else f_p)      [H]
//   row p consumes (g, x_{p+1}) at position p:
//     u  = [RMS(E[x]; input_layernorm) ; RMS(g; hidden_norm)]          [2H]: embedding first
//     h1 = r + W_o · attention(W_q u, W_k u, W_v u) over the drafter's own KV (causal, RoPE at p)
//          r = g (or RMS(g; hidden_norm) with norm_before_residual)
//     o  = h1 + MLP(RMS(h1; post_attention_layernorm))
//     logits = lm_head · RMS(o; norm)                                   over the draft vocabulary
//   o (before the final norm) is the next step's g.
// Draft column i is target token i + d2t[i] (Hugging Face stores offsets; llama.cpp's
// eagle3 GGUF absolute ids, turned into offsets by its dialect, io/gguf_eagle3.cc).
// Layouts: the official / SpecForge `midlayer.*`, vLLM's `layers.0.*`, and RedHat's
// speculators form (the layer config under `transformer_layer_config`).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/checkpoint.h"
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/decoder_block.h"
#include "model/decoder_model.h"
#include "model/drafter_config.h"
#include "model/mtp_head.h"
#include "model/rope_table.h"
#include "util/error.h"

#include <fmt/ranges.h>

namespace nextn {
namespace {

const char* const kEagle3Architectures[] = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator",
                                            "Eagle3DraftModel"};

// The config with a speculators checkpoint's `transformer_layer_config` lifted to the top.
nlohmann::json flat_eagle3_config(const nlohmann::json& config) {
  nlohmann::json flat = config;
  if (config.contains("transformer_layer_config") && config["transformer_layer_config"].is_object())
    for (const auto& [key, value] : config["transformer_layer_config"].items())
      if (!flat.contains(key) || key == "vocab_size") flat[key] = value;
  return flat;
}

// The first of `names` the store holds ("" when none does).
std::string first_present(const WeightStore& store, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (store.has(n)) return n;
  return "";
}

class Eagle3Head : public MtpHead {
 public:
  Eagle3Head(std::unique_ptr<Checkpoint> ckpt, DecoderModel& target)
      : ckpt_(std::move(ckpt)), store_(*ckpt_, target.copy_weights()), target_(target) {
    const std::string dir = ckpt_->dir();
    const nlohmann::json json = flat_eagle3_config(ckpt_->config());
    ConfigReader c(json, (std::filesystem::path(dir) / "config.json").string());
    const ModelConfig& tc = target.config();

    if (c.get_int("num_hidden_layers", 1) != 1)
      c.error(ErrorKind::kUnsupported, "EAGLE-3 drafters with {} layers are not supported (one layer)",
              c.get_int("num_hidden_layers", 1));
    const int vocab = c.get_int("vocab_size", tc.vocab_size);
    if (vocab != tc.vocab_size)
      c.error(ErrorKind::kBadInput, "vocab_size {} does not match the target's vocab_size {} ({})", vocab,
              tc.vocab_size, target.dir());
    target_hidden_ = c.get_int("target_hidden_size", tc.hidden_size);
    if (target_hidden_ != tc.hidden_size)
      c.error(ErrorKind::kBadInput, "target_hidden_size {} does not match the target's hidden_size {} ({})",
              target_hidden_, tc.hidden_size, target.dir());
    BlockShape& b = shape_;
    b.hidden = c.require_int("hidden_size");
    b.heads = c.require_int("num_attention_heads");
    b.kv_heads = c.get_int("num_key_value_heads", b.heads);
    if (b.hidden <= 0 || b.heads <= 0 || b.kv_heads <= 0 || b.heads % b.kv_heads != 0)
      c.error(ErrorKind::kBadInput, "hidden_size and num_attention_heads ({}) must be positive, a multiple of "
              "num_key_value_heads ({})", b.heads, b.kv_heads);
    b.head_dim = c.get_int("head_dim", b.hidden / b.heads);
    if (b.head_dim <= 0 || b.head_dim % 2 != 0)
      c.error(ErrorKind::kBadInput, "head_dim must be positive and even, got {}", b.head_dim);
    b.intermediate = c.require_int("intermediate_size");
    if (b.intermediate <= 0) c.error(ErrorKind::kBadInput, "intermediate_size must be positive");
    b.eps = float(c.get_double("rms_norm_eps", 1e-6));
    ModelConfig rope;
    parse_rope_scaling(c, rope);
    inv_freq_ = rope_inv_freq(b.head_dim, rope_parameter(c, "rope_theta", 10000.0), rope.rope_scaling);
    norm_before_residual_ = c.get_bool("norm_before_residual", false);
    const bool norm_before_fc = c.get_bool("norm_before_fc", false);
    streams_ = aux_layer_ids(c, json, tc.num_layers);

    // Tensors, under whichever prefix the layout uses.
    const int64_t H = b.hidden, q_dim = int64_t(b.heads) * b.head_dim, kv_dim = int64_t(b.kv_heads) * b.head_dim;
    std::string layer = "midlayer.";
    if (!store_.has(layer + "input_layernorm.weight"))
      layer = store_.has("layers.0.input_layernorm.weight") ? "layers.0." : "model.layers.0.";
    input_norm_ = store_.vector(layer + "input_layernorm.weight", H);
    hidden_norm_ = store_.vector(layer + "hidden_norm.weight", H);
    const bool bias = store_.has(layer + "self_attn.q_proj.bias");
    q_ = store_.linear(layer + "self_attn.q_proj", q_dim, 2 * H, bias);
    k_ = store_.linear(layer + "self_attn.k_proj", kv_dim, 2 * H, bias);
    v_ = store_.linear(layer + "self_attn.v_proj", kv_dim, 2 * H, bias);
    o_ = store_.linear(layer + "self_attn.o_proj", H, q_dim, false);
    mlp_ = load_mlp(store_, layer, int(H), b.intermediate, 0.0f);
    const std::string fc = first_present(store_, {"fc.weight", "model.fc.weight"});
    fc_ = store_.matrix(fc.empty() ? "fc.weight" : fc, H, 3 * int64_t(target_hidden_));
    if (norm_before_fc) fc_norm_ = store_.vector("input_norm.weight", 3 * int64_t(target_hidden_));
    const std::string norm = first_present(store_, {"norm.weight", "model.norm.weight"});
    norm_ = store_.vector(norm.empty() ? "norm.weight" : norm, H);

    // The draft vocabulary: lm_head rows and their target ids.
    const int draft_vocab = c.get_int("draft_vocab_size", vocab);
    if (draft_vocab <= 0 || draft_vocab > vocab)
      c.error(ErrorKind::kBadInput, "draft_vocab_size {} must be in 1..vocab_size ({})", draft_vocab, vocab);
    if (store_.has("lm_head.weight")) {
      lm_head_ = store_.matrix("lm_head.weight", draft_vocab, H);
    } else if (draft_vocab == vocab && H == tc.hidden_size) {
      lm_head_ = target.lm_head();
    } else {
      c.error(ErrorKind::kBadInput, "{}: no lm_head.weight (only a drafter scoring the target's whole vocabulary at "
              "the target's width may use the target's)", ckpt_->tensor_source());
    }
    if (draft_vocab < vocab || ckpt_->find_raw("d2t")) draft_ids_ = read_d2t(draft_vocab, vocab);
    const std::string embed = first_present(store_, {"embed_tokens.weight", "model.embed_tokens.weight"});
    if (!embed.empty()) {
      embedding_ = store_.matrix(embed, vocab, H, WeightStore::Access::kRows);
    } else if (H == tc.hidden_size) {
      embedding_ = target.embedding();
      embedding_scale_ = tc.embedding_scale;
    } else {
      c.error(ErrorKind::kBadInput, "hidden_size {} differs from the target's {} and the drafter has no "
              "embed_tokens.weight of its own", H, tc.hidden_size);
    }
  }

  int num_layers() const override { return 1; }
  MtpLayout layout() const override { return MtpLayout::kNone; }
  int input_width() const override { return shape_.hidden; }
  std::vector<int> target_streams() const override { return streams_; }
  std::span<const int32_t> draft_ids() const override { return draft_ids_; }
  WeightMatrix output_head(int) const override { return lm_head_; }

  std::unique_ptr<SequenceState> new_state(int max_tokens, const KvOptions& options) const override {
    LayerStateSpec layer;
    layer.heads = shape_.heads;
    layer.kv_heads = shape_.kv_heads;
    layer.head_dim = shape_.head_dim;
    return std::make_unique<SequenceState>(std::vector<LayerStateSpec>{layer}, max_tokens, options);
  }

  void project_target(const float* streams, int n, float* g) override {
    const int64_t width = 3 * int64_t(target_hidden_);
    const float* f = streams;
    if (fc_norm_) {
      grow(fc_in_, size_t(n) * width);
      rms_norm(streams, fc_norm_, n, width, shape_.eps, fc_in_.data());
      f = fc_in_.data();
    }
    matmul(fc_, f, n, g);
  }

  void forward(int layer, std::span<const MtpRows> sequences, std::vector<float>& logits,
               std::vector<float>& hidden_out, int vocab_rows) override {
    if (layer != 0) fail(ErrorKind::kInternal, "EAGLE-3 layer {} out of range (one layer)", layer);
    const BlockShape& b = shape_;
    const int64_t H = b.hidden, D = b.head_dim, q_dim = b.heads * D, kv_dim = b.kv_heads * D;
    int n = 0, n_logits = 0;
    for (const MtpRows& seq : sequences) {
      const int rows = int(seq.tokens.size());
      if (seq.state->length() + rows > seq.state->max_tokens())
        fail(ErrorKind::kResource, "EAGLE-3 context is full: {} + {} tokens exceed the KV cache capacity of {}",
             seq.state->length(), rows, seq.state->max_tokens());
      n += rows;
      n_logits += int(seq.logit_rows.size());
    }
    const size_t N = size_t(n);
    grow(u_, N * 2 * H);
    grow(x_, N * H);
    grow(q_out_, N * q_dim);
    grow(k_out_, N * kv_dim);
    grow(v_out_, N * kv_dim);
    grow(attn_, N * q_dim);
    grow(proj_, N * H);
    tokens_.resize(N);
    positions_.resize(N);
    // u = [RMS(e); RMS(g)], x = the residual base; each sequence's g is read here, before
    // hidden_out (which it may live in) is resized.
    for (size_t s = 0, row = 0; s < sequences.size(); row += sequences[s].tokens.size(), ++s) {
      const MtpRows& seq = sequences[s];
      for (size_t i = 0; i < seq.tokens.size(); ++i) {
        tokens_[row + i] = seq.tokens[i];
        positions_[row + i] = seq.state->length() + int(i);
        const float* g = seq.hidden + i * size_t(H);
        float* u = u_.data() + (row + i) * 2 * size_t(H);
        rms_norm(g, hidden_norm_, 1, H, b.eps, u + H);
        std::copy_n(norm_before_residual_ ? u + H : g, H, x_.data() + (row + i) * size_t(H));
      }
    }
    grow(e_, N * H);
    embed_rows(embedding_, tokens_.data(), n, e_.data());
    if (embedding_scale_ != 1.0f)
      for (size_t i = 0; i < N * size_t(H); ++i) e_[i] *= embedding_scale_;
    for (size_t r = 0; r < N; ++r)
      rms_norm(e_.data() + r * size_t(H), input_norm_, 1, H, b.eps, u_.data() + r * 2 * size_t(H));

    // Attention over each sequence's own KV.
    apply_each(u_.data(), n, {{q_, q_out_.data()}, {k_, k_out_.data()}, {v_, v_out_.data()}});
    rope(q_out_.data(), n, b.heads, D, positions_.data(), inv_freq_.data());
    rope(k_out_.data(), n, b.kv_heads, D, positions_.data(), inv_freq_.data());
    const float scale = 1.0f / std::sqrt(float(D));
    for (size_t s = 0, row = 0; s < sequences.size(); row += sequences[s].tokens.size(), ++s) {
      const MtpRows& seq = sequences[s];
      const int rows = int(seq.tokens.size()), pos = seq.state->length();
      if (rows == 0) continue;
      seq.state->begin_rows(rows, false);
      const AttentionSlot slot = seq.state->attention(0);
      slot.cache->append(slot.layer, pos, rows, k_out_.data() + row * kv_dim, v_out_.data() + row * kv_dim);
      slot.cache->attend(slot.layer, pos, rows, q_out_.data() + row * q_dim, attn_.data() + row * q_dim, scale);
      seq.state->end_rows();
    }
    apply(o_, attn_.data(), n, proj_.data());
    add_into(x_.data(), proj_.data(), N * size_t(H));
    run_mlp(mlp_, int(H), b.intermediate, b.eps, x_.data(), n, scratch_);

    hidden_out.assign(x_.begin(), x_.begin() + std::ptrdiff_t(N * size_t(H)));
    WeightMatrix head = lm_head_;
    if (vocab_rows > 0) head.rows = std::min<int64_t>(head.rows, vocab_rows);  // --draft-vocab
    logits.resize(size_t(n_logits) * size_t(head.rows));
    if (n_logits == 0) return;
    grow(gathered_, size_t(n_logits) * H);
    size_t out = 0, row0 = 0;
    for (const MtpRows& seq : sequences) {
      for (int r : seq.logit_rows) {
        if (r < 0 || r >= int(seq.tokens.size()))
          fail(ErrorKind::kInternal, "EAGLE-3 forward: logit row {} out of range", r);
        rms_norm(x_.data() + (row0 + size_t(r)) * H, norm_, 1, H, b.eps, gathered_.data() + (out++) * H);
      }
      row0 += seq.tokens.size();
    }
    matmul(head, gathered_.data(), n_logits, logits.data());
  }

 private:
  static void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  }

  // The three target streams: the configured layer ids (each the INPUT of that layer, as
  // the EAGLE-3 reference, vLLM and llama.cpp read them), else layers 2, N/2 and N-3.
  std::vector<int> aux_layer_ids(const ConfigReader& c, const nlohmann::json& json, int target_layers) const {
    const nlohmann::json* ids = nullptr;
    if (json.contains("eagle_aux_hidden_state_layer_ids")) ids = &json["eagle_aux_hidden_state_layer_ids"];
    else if (json.contains("eagle_config") && json["eagle_config"].is_object() &&
             json["eagle_config"].contains("eagle_aux_hidden_state_layer_ids"))
      ids = &json["eagle_config"]["eagle_aux_hidden_state_layer_ids"];
    std::vector<int> out;
    if (ids && !ids->is_null()) {
      if (!ids->is_array() || ids->size() != 3)
        c.error(ErrorKind::kBadInput, "eagle_aux_hidden_state_layer_ids must list three layer ids");
      for (const auto& id : *ids) {
        if (!id.is_number_integer() || id.get<int>() < 0 || id.get<int>() > target_layers)
          c.error(ErrorKind::kBadInput, "eagle_aux_hidden_state_layer_ids: {} is not a layer of the target (0..{})",
                  id.dump(), target_layers);
        out.push_back(id.get<int>());
      }
      return out;
    }
    if (target_layers < 4)
      c.error(ErrorKind::kBadInput, "the target has {} layers; the default EAGLE-3 layers (2, N/2, N-3) need 4 or "
              "more (name them in eagle_aux_hidden_state_layer_ids)", target_layers);
    return {2, target_layers / 2, target_layers - 3};
  }

  // d2t: [draft_vocab] int64 offsets (target id = i + d2t[i]), checked to be distinct ids
  // inside the target's vocabulary.
  std::vector<int32_t> read_d2t(int draft_vocab, int vocab) const {
    const RawTensor* t = ckpt_->find_raw("d2t");
    const std::string where = ckpt_->tensor_source();
    if (!t)
      fail(ErrorKind::kBadInput, "{}: draft_vocab_size {} < vocab_size {} but the checkpoint has no d2t tensor",
           where, draft_vocab, vocab);
    if (t->dtype != "I64" || t->shape != std::vector<int64_t>{draft_vocab} || t->nbytes != size_t(draft_vocab) * 8)
      fail(ErrorKind::kBadInput, "{}: d2t must be I64 [{}], got {} [{}]", where, draft_vocab, t->dtype,
           fmt::join(t->shape, ", "));
    std::vector<int32_t> ids(static_cast<size_t>(draft_vocab), 0);
    std::vector<bool> seen(static_cast<size_t>(vocab), false);
    for (int i = 0; i < draft_vocab; ++i) {
      int64_t offset;
      std::memcpy(&offset, static_cast<const char*>(t->data) + size_t(i) * 8, 8);
      const int64_t id = i + offset;
      if (id < 0 || id >= vocab || seen[size_t(id)])
        fail(ErrorKind::kBadInput, "{}: d2t[{}] maps draft token {} to {}, {}", where, i, i, id,
             id < 0 || id >= vocab ? fmt::format("outside the target vocabulary (0..{})", vocab - 1)
                                   : std::string("a target token mapped twice"));
      seen[size_t(id)] = true;
      ids[size_t(i)] = int32_t(id);
    }
    return ids;
  }

  std::unique_ptr<Checkpoint> ckpt_;
  WeightStore store_;
  DecoderModel& target_;
  BlockShape shape_;                // H = hidden, heads, kv heads, head_dim, intermediate, eps
  std::vector<float> inv_freq_;     // [head_dim / 2]
  int target_hidden_ = 0;           // H_t
  std::vector<int> streams_;        // the three target streams, in concatenation order
  bool norm_before_residual_ = false;
  WeightMatrix fc_;                 // [H, 3·H_t]
  const float* fc_norm_ = nullptr;  // [3·H_t] input_norm, norm_before_fc only
  WeightMatrix embedding_;          // [V, H]: the drafter's own, else the target's
  float embedding_scale_ = 1.0f;    // the target's, when its table is borrowed
  const float* input_norm_ = nullptr;   // [H] on the embedding
  const float* hidden_norm_ = nullptr;  // [H] on g
  Linear q_, k_, v_;                // [heads·hd, 2H], [kv·hd, 2H] ×2
  Linear o_;                        // [H, heads·hd]
  MlpWeights mlp_;                  // post_attention_layernorm [H]; gate/up [I, H]; down [H, I]
  const float* norm_ = nullptr;     // [H] final norm
  WeightMatrix lm_head_;            // [V_d, H]
  std::vector<int32_t> draft_ids_;  // [V_d]: target id of each draft column (empty: the identity)

  BlockScratch scratch_;
  std::vector<float> fc_in_, u_, x_, e_, q_out_, k_out_, v_out_, attn_, proj_, gathered_;
  std::vector<int32_t> tokens_, positions_;
};

}  // namespace

bool MtpHead::is_eagle3(const nlohmann::json& config) {
  if (!config.is_object()) return false;
  if (config.value("speculators_model_type", "") == "eagle3") return true;
  if (config.contains("architectures") && config["architectures"].is_array())
    for (const auto& a : config["architectures"])
      for (const char* name : kEagle3Architectures)
        if (a.is_string() && a.get<std::string>() == name) return true;
  return false;
}

std::unique_ptr<MtpHead> MtpHead::load_eagle3(const std::string& dir, Model& target) {
  auto* decoder = dynamic_cast<DecoderModel*>(&target);
  if (!decoder) fail(ErrorKind::kInternal, "EAGLE-3: unsupported target model type");
  return std::make_unique<Eagle3Head>(Checkpoint::open(dir), *decoder);
}

}  // namespace nextn
