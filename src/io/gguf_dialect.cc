// io/gguf_dialect.cc — the registry of GGUF dialects (see gguf_dialect.h).
#include "io/gguf_dialect.h"

namespace nextn {

const GgufDialect& gguf_llama_dialect();             // io/gguf_llama.cc
const GgufDialect& gguf_qwen2_dialect();             // io/gguf_qwen2.cc
const GgufDialect& gguf_qwen3_dialect();             // io/gguf_qwen3.cc
const GgufDialect& gguf_glm4moe_dialect();           // io/gguf_glm4moe.cc
const GgufDialect& gguf_qwen35_dialect();            // io/gguf_qwen35.cc
const GgufDialect& gguf_qwen35moe_dialect();         // io/gguf_qwen35.cc
const GgufDialect& gguf_gemma4_dialect();            // io/gguf_gemma4.cc
const GgufDialect& gguf_gemma4_assistant_dialect();  // io/gguf_gemma4_assistant.cc
const GgufDialect& gguf_eagle3_dialect();            // io/gguf_eagle3.cc
const GgufDialect& gguf_dflash_dialect();            // io/gguf_dflash.cc
const GgufDialect& gguf_clip_qwen3vl_dialect();      // io/gguf_clip_qwen3vl.cc
const GgufDialect& gguf_clip_gemma4v_dialect();      // io/gguf_clip_gemma4v.cc

namespace {

const std::vector<const GgufDialect*>& dialects() {
  static const std::vector<const GgufDialect*> all = {
      &gguf_llama_dialect(),   &gguf_qwen2_dialect(),     &gguf_qwen3_dialect(),
      &gguf_glm4moe_dialect(), &gguf_qwen35_dialect(),    &gguf_qwen35moe_dialect(),
      &gguf_gemma4_dialect(),  &gguf_gemma4_assistant_dialect(), &gguf_eagle3_dialect(),
      &gguf_dflash_dialect(),  &gguf_clip_qwen3vl_dialect(), &gguf_clip_gemma4v_dialect()};
  return all;
}

}  // namespace

const GgufDialect* gguf_dialect(const std::string& arch) {
  for (const GgufDialect* d : dialects())
    if (d->arch() == arch) return d;
  return nullptr;
}

const GgufDialect* gguf_dialect(const std::string& arch, const nlohmann::json& kv) {
  if (arch != "clip") return gguf_dialect(arch);
  for (const char* key : {"clip.vision.projector_type", "clip.projector_type"})
    if (kv.contains(key) && kv[key].is_string()) return gguf_dialect("clip:" + kv[key].get<std::string>());
  return nullptr;
}

std::vector<std::string> gguf_dialect_archs() {
  std::vector<std::string> names;
  for (const GgufDialect* d : dialects()) names.push_back(d->arch());
  return names;
}

const GgufDialect* gguf_dialect_writing(const std::string& hf_architecture) {
  for (const GgufDialect* d : dialects())
    if (d->writes(hf_architecture)) return d;
  return nullptr;
}

}  // namespace nextn
