// io/gguf_llama.cc — llama.cpp's `llama` GGUF: the shared decoder reading
// (gguf_decoder.h) with Q and K rows put back in Hugging Face order (llama.cpp's
// converter interleaves the two halves of each head for its RoPE).
#include <cstring>

#include "io/gguf_decoder.h"
#include "util/error.h"

namespace nextn {
namespace {

class LlamaDialect : public GgufDecoderDialect {
 public:
  LlamaDialect() : GgufDecoderDialect("llama", "LlamaForCausalLM", "llama") {}

  TensorView read_tensor(const TensorView& t, const std::string& hf, const GgufMetadata& md,
                         std::vector<std::unique_ptr<uint8_t[]>>& owned) const override {
    return llama_qk_rows_to_hf(t, GgufDecoderDialect::read_tensor(t, hf, md, owned), md, owned);
  }
};

}  // namespace

TensorView llama_qk_rows_to_hf(const TensorView& t, TensorView view, const GgufMetadata& md,
                               std::vector<std::unique_ptr<uint8_t[]>>& owned) {
  const bool is_q = t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_q.bias");
  const bool is_k = t.name.ends_with(".attn_k.weight") || t.name.ends_with(".attn_k.bias");
  if (!is_q && !is_k) return view;
  const int64_t n_heads = md.integer("attention.head_count");
  const int64_t heads = is_q ? n_heads : md.integer("attention.head_count_kv", n_heads);
  if (heads <= 0 || t.shape.empty() || t.shape[0] % (2 * heads) != 0)
    fail(ErrorKind::kBadInput, "{}: tensor '{}' has {} rows, not a multiple of 2 × {} heads", t.file, t.name,
         t.shape.empty() ? 0 : t.shape[0], heads);
  // Row 2j + s of a head in the file is Hugging Face row s·head_dim/2 + j.
  const int64_t rows = t.shape[0], head_dim = rows / heads;
  const size_t row_bytes = t.nbytes / size_t(rows);
  auto out = std::make_unique<uint8_t[]>(t.nbytes);
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < head_dim / 2; ++j)
      for (int64_t s = 0; s < 2; ++s)
        std::memcpy(out.get() + (h * head_dim + s * (head_dim / 2) + j) * row_bytes,
                    src + (h * head_dim + 2 * j + s) * row_bytes, row_bytes);
  view.data = out.get();
  owned.push_back(std::move(out));
  return view;
}

const GgufDialect& gguf_llama_dialect() {
  static const LlamaDialect dialect;
  return dialect;
}

}  // namespace nextn
