// io/gguf_dialect.h — what one GGUF architecture (general.architecture) means in Hugging
// Face terms, both ways, as llama.cpp's converter (convert_hf_to_gguf.py) writes it:
// tensor names, metadata keys ↔ config.json, the values it rewrites, and the tensors it
// adds. One file per architecture (io/gguf_<arch>.cc) plus, in gguf_dialect.cc, its
// accessor's declaration and one line in the registry.
//
// Every architecture nextn reads has one. The decoder families (llama, qwen2, qwen3,
// glm4moe, qwen35, qwen35moe) share their reading in gguf_decoder.h; `nextn quantize`
// still writes them through its own branches (cli/quantize.cc), Gemma 4 through its
// dialect.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf_metadata.h"
#include "io/gguf_writer.h"
#include "io/tensor.h"

namespace nextn {

// A tensor the converter computes rather than copies (Gemma 4's rope_freqs), kept F32.
struct GgufGeneratedTensor {
  std::string name;
  std::vector<int64_t> shape;  // PyTorch order
  std::vector<float> values;
};

class GgufDialect {
 public:
  virtual ~GgufDialect() = default;
  virtual std::string arch() const = 0;
  // Whether `nextn quantize` writes a checkpoint of this Hugging Face architecture
  // (config.json "architectures"[0]) in this dialect.
  virtual bool writes(const std::string& hf_architecture) const = 0;

  // GGUF tensor name → the Hugging Face name the model reads ("" for tensors it does
  // not read, such as metadata-like tensors consumed by config()).
  virtual std::string hf_name(const std::string& gguf_name) const = 0;
  // Hugging Face name → GGUF name; "" if the file has no place for it.
  virtual std::string gguf_name(const std::string& hf_name) const = 0;

  // Reading, per tensor: `t` as the model reads it under the Hugging Face name `hf`
  // (hf_name(t.name)): renamed, and rewritten where the converter changed its values or
  // shape (new buffers go to `owned`, which the checkpoint keeps). Default: renamed.
  virtual TensorView read_tensor(const TensorView& t, const std::string& hf, const GgufMetadata& md,
                                 std::vector<std::unique_ptr<uint8_t[]>>& owned) const {
    TensorView view = t;
    view.name = hf;
    return view;
  }
  // Reading, per integer tensor (io/gguf.h raw_tensors): `t` under the Hugging Face name
  // `hf`, rewritten where the converter changed its values. Default: renamed.
  virtual RawTensor read_raw(const RawTensor& t, const std::string& hf, const GgufMetadata& md,
                             std::vector<std::unique_ptr<uint8_t[]>>& owned) const {
    (void)md, (void)owned;
    RawTensor raw = t;
    raw.name = hf;
    return raw;
  }
  // Reading: tensors the converter split that the model reads whole (hf_name gives each
  // part ""), built from the file's tensors by GGUF name; new buffers go to `owned`.
  // Default: none.
  virtual std::vector<TensorView> joined(const std::map<std::string, const TensorView*>& tensors,
                                         const GgufMetadata& md,
                                         std::vector<std::unique_ptr<uint8_t[]>>& owned) const {
    (void)tensors, (void)md, (void)owned;
    return {};
  }
  // Reading: config.json from the metadata and the file's tensors (by GGUF name).
  virtual nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors) const = 0;
  // Writing: the <arch>.* metadata keys for a Hugging Face config (text_config when nested).
  virtual void write_metadata(const nlohmann::json& config, GgufWriter& w) const = 0;
  // Writing: the tokenizer.ggml.model the converter gives a SentencePiece-style vocabulary.
  virtual std::string spm_vocabulary() const { return "llama"; }
  // Writing: tensors the converter adds.
  virtual std::vector<GgufGeneratedTensor> generated(const nlohmann::json& config) const { return {}; }
};

// The dialect of a file whose general.architecture is `arch` and whose metadata is `kv`;
// nullptr when none is registered. llama.cpp's vision projector files (mmproj-*.gguf) all
// say "clip": their projector type picks the dialect, registered as "clip:<type>".
const GgufDialect* gguf_dialect(const std::string& arch, const nlohmann::json& kv);
// The dialect registered under `name` (an architecture, or "clip:<projector type>").
const GgufDialect* gguf_dialect(const std::string& name);
// The architectures with a dialect, for messages.
std::vector<std::string> gguf_dialect_archs();
// The dialect `nextn quantize` writes a Hugging Face architecture in; nullptr if none.
const GgufDialect* gguf_dialect_writing(const std::string& hf_architecture);

}  // namespace nextn
