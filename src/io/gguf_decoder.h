// io/gguf_decoder.h — what the GGUF dialects of the decoder families (llama, qwen2,
// qwen3, glm4moe, qwen35, qwen35moe; one file each, io/gguf_<arch>.cc) share when read:
// llama.cpp's name tables (gguf_names.cc), the common metadata keys → config.json
// (block_count less nextn_predict_layers, embedding_length, feed_forward_length, head
// counts, key_length, rms epsilon, rope.freq_base, linear rope scaling, context_length),
// the vocabulary and tied head from the tensors present, and the Qwen shared expert's
// gate read as [1, H] however it is stored. A family adds its own keys (family_config)
// and undoes its converter's rewrites (read_tensor). Writing these families is still
// cli/quantize.cc's (it needs the parsed ModelConfig of model/, which io does not see).
#pragma once
#include "io/gguf_dialect.h"

namespace nextn {

class GgufDecoderDialect : public GgufDialect {
 public:
  GgufDecoderDialect(std::string arch, std::string hf_architecture, std::string model_type)
      : arch_(std::move(arch)), hf_architecture_(std::move(hf_architecture)), model_type_(std::move(model_type)) {}

  std::string arch() const override { return arch_; }
  bool writes(const std::string&) const override { return false; }
  std::string hf_name(const std::string& gguf_name) const override;
  std::string gguf_name(const std::string& hf_name) const override;
  nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors) const override;
  TensorView read_tensor(const TensorView& t, const std::string& hf, const GgufMetadata& md,
                         std::vector<std::unique_ptr<uint8_t[]>>& owned) const override;
  void write_metadata(const nlohmann::json& config, GgufWriter& w) const override;

 protected:
  // The family's own config keys, after the common ones are in `c`.
  virtual void family_config(const GgufMetadata&, const std::map<std::string, const TensorView*>&,
                             nlohmann::json&) const {}
  // The config key that counts the MTP layers (Qwen3.5: mtp_num_hidden_layers).
  virtual const char* mtp_key() const { return "num_nextn_predict_layers"; }
  // Whether feed_forward_length is required (qwen35moe has no dense MLP).
  virtual bool dense_mlp_required() const { return true; }

  // The decoder layers (block_count less the MTP blocks llama.cpp counts among them).
  static int64_t decoder_layers(const GgufMetadata& md);
  // head_dim from the config being built (key_length, else hidden / heads).
  static int64_t head_dim(const nlohmann::json& c);
  // Whether any layer has a q_proj bias (an MTP-only file has no layer 0).
  static bool has_q_bias(const std::map<std::string, const TensorView*>& tensors);

 private:
  std::string arch_, hf_architecture_, model_type_;
};

// llama.cpp's converter interleaves the two halves of each head's Q and K rows for its
// RoPE (llama and eagle3 files): `view` (t renamed) with them put back in Hugging Face
// order; other tensors unchanged (gguf_llama.cc).
TensorView llama_qk_rows_to_hf(const TensorView& t, TensorView view, const GgufMetadata& md,
                               std::vector<std::unique_ptr<uint8_t[]>>& owned);

}  // namespace nextn
