// cli/gguf_tokenizer_metadata.cc — tokenizer.json → tokenizer.ggml.* (via tokenizer/gguf_vocab.h).
#include "cli/gguf_tokenizer_metadata.h"

#include <filesystem>

#include "io/gguf_writer.h"
#include "io/json_file.h"
#include "model/config.h"
#include "tokenizer/gguf_vocab.h"

namespace nextn {

void write_tokenizer_metadata(const std::string& src_dir, const ModelConfig& c, const std::string& spm_form,
                              GgufWriter& w) {
  namespace fs = std::filesystem;
  const std::string tj_path = (fs::path(src_dir) / "tokenizer.json").string();
  const std::string cfg_path = (fs::path(src_dir) / "tokenizer_config.json").string();
  const nlohmann::json tj = read_json_file(tj_path);
  const nlohmann::json cfg = fs::exists(cfg_path) ? read_json_file(cfg_path) : nlohmann::json::object();
  GgufVocab v = gguf_vocab_from_tokenizer_json(tj, cfg, c.vocab_size, tj_path);
  // "gemma4" keeps the merges themselves and has no ▁-prefix switch: a tokenizer that
  // prepends ▁ stays "llama".
  if (v.model == "llama" && spm_form == "gemma4" && !v.add_space_prefix) v.model = "gemma4";
  w.set_string("tokenizer.ggml.model", v.model);
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_strings("tokenizer.ggml.tokens", v.tokens);
  w.set_i32s("tokenizer.ggml.token_type", v.token_types);
  if (v.model == "gpt2") {
    w.set_strings("tokenizer.ggml.merges", v.merges);
  } else {  // SentencePiece-style: "llama" (scores) or "gemma4" (merges)
    if (v.model == "llama") w.set_f32s("tokenizer.ggml.scores", v.scores);
    else w.set_strings("tokenizer.ggml.merges", v.merges);
    w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
    for (size_t i = 0; i < v.token_types.size(); ++i)
      if (v.token_types[i] == kTokenUnknown) {
        w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(i));
        break;
      }
  }
  // generation_config's eos wins over tokenizer_config's, as in the model config.
  const int32_t eos = c.eos_token_ids.empty() ? v.eos : c.eos_token_ids.front();
  if (c.bos_token_id >= 0 || v.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos >= 0 ? v.bos : c.bos_token_id));
  if (eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  if (v.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (!v.chat_template.empty()) w.set_string("tokenizer.chat_template", v.chat_template);
}

}  // namespace nextn
