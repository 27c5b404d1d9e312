// model/dflash_model.h — the DFlash block-diffusion drafter (Hugging Face
// DFlashDraftModel, model_type qwen3; llama.cpp's `dflash` GGUF). It is Nd Qwen3 decoder
// layers plus fc, hidden_norm and norm, with no embedding and no head of its own: the
// TARGET's embedding (and its embedding scale) makes the block's input rows and the
// target's lm_head (and final soft-cap) scores them. Per committed target row j:
//   c_j = [S[l_1+1]_j ; … ; S[l_K+1]_j]           residual streams after target layers l_i
//   g_j = RMSNorm(W_fc c_j; hidden_norm)           the same g_j for every drafter layer
//   per layer: Kc_j = RoPE_j(k_norm(W_k g_j)),  Vc_j = W_v g_j     (the context cache)
// A block of B rows at positions P..P+B-1 (P: the target's committed length) holds
// [last, M, …, M] (M = mask_token_id); every block row attends over all context rows and
// all block rows (not causal), the block's own K/V being transient; slot i's logits
// predict the token at P+i.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace nextn {

class Model;

// One sequence's context cache: per drafter layer and key/value head, the keys and values
// of its committed rows, one row of head_dim floats per position. Append-only; rollback
// truncates.
struct DFlashContext {
  int length = 0;                        // rows held: positions [0, length)
  std::vector<std::vector<float>> k, v;  // [layer * kv_heads + head]: [length, head_dim]
  void truncate(int n);
  size_t bytes() const;
};

// One sequence's block in a batched draft call.
struct DFlashBlock {
  const DFlashContext* context = nullptr;  // its rows precede the block: the block starts at context->length
  std::span<const int32_t> tokens;         // [last, M, …]: 2..block_size rows
};

class DFlashModel {
 public:
  // Whether a drafter's config (model/drafter_config.h) names a DFlash drafter.
  static bool is_dflash(const nlohmann::json& config);
  // Loads it and checks it against `target` (which must outlive it): hidden size,
  // vocabulary, number of target layers and streams, tap ids and the mask id must fit,
  // else an nextn::Error naming the file and both values.
  static std::unique_ptr<DFlashModel> load(const std::string& dir, const Model& target);
  virtual ~DFlashModel() = default;

  virtual int block_size() const = 0;
  virtual int32_t mask_token() const = 0;
  virtual int num_layers() const = 0;
  // The target residual streams one context row is made of (Model::capture_streams
  // numbering: target_layer_ids + 1), in fc's column order.
  virtual const std::vector<int>& streams() const = 0;
  // A fresh, empty context.
  virtual DFlashContext new_context() const = 0;

  // Appends rows at positions [ctx.length, ctx.length + n): streams [n, streams().size() ×
  // target hidden] (the target's TargetRows::streams).
  virtual void add_context(DFlashContext& ctx, const float* streams, int n) = 0;
  // One forward over every block at once; logits out: for each block in order, the rows
  // of slots 1..tokens.size()-1 ([Σ (tokens.size() − 1), V]); slot 0 predicts nothing.
  // vocab_rows > 0 scores only the first vocab_rows token ids (V = vocab_rows; a reduced
  // draft vocabulary), else V = the vocabulary.
  virtual void draft_blocks(std::span<const DFlashBlock> blocks, std::vector<float>& logits, int vocab_rows = 0) = 0;
};

}  // namespace nextn
