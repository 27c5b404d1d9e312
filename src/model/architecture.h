// model/architecture.h — the architecture registry. Each supported architecture is
// one file (llama.cc, qwen2.cc, qwen3_5.cc, ...) defining an Architecture, plus its
// extern below and one line in the table of architectures.cc (the tools and tests that
// must know it too: docs/architecture.md, "How to add"). All share the generic decoder (decoder_model.cc):
// an architecture says which config keys and tensor variants it uses, fills the
// per-layer specification (ModelConfig::layers) and may build its own layers.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/config_reader.h"

namespace nextn {

class Block;
class Checkpoint;
class InputStage;
class WeightStore;

struct Architecture {
  const char* name;        // config.json "architectures"[0], e.g. "Qwen3ForCausalLM"
  const char* model_type;  // config.json "model_type", e.g. "qwen3"
  // Sets the architecture's own fields; the common keys are already parsed into `config`.
  void (*configure)(const ConfigReader& reader, const Checkpoint& ckpt, ModelConfig& config);
  // Builds one layer of the trunk or of the MTP head from tensors under `prefix` (ends
  // in '.'); nullptr: every layer is the shared attention block (decoder_block.h).
  std::unique_ptr<Block> (*make_block)(const ModelConfig& config, const LayerSpec& layer, WeightStore& store,
                                       const std::string& prefix) = nullptr;
  // Set for architectures recognized only to be refused: the reason, named at load.
  const char* unsupported = nullptr;
  // Per-row layer inputs computed before layer 0 (block.h InputStage); nullptr: none.
  std::unique_ptr<InputStage> (*make_input_stage)(const ModelConfig& config, WeightStore& store) = nullptr;
};

// Defined one per file.
extern const Architecture kLlamaArchitecture;
extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kMiMoArchitecture;
extern const Architecture kQwen3_5Architecture;             // Qwen3_5ForCausalLM
extern const Architecture kQwen3_5VisionLanguageArchitecture;  // Qwen3_5ForConditionalGeneration (text part)
extern const Architecture kQwen3_5MoeArchitecture;          // Qwen3_5MoeForConditionalGeneration (text part)
extern const Architecture kQwen3_5MoeTextArchitecture;      // Qwen3_5MoeForCausalLM
extern const Architecture kQwen3NextArchitecture;           // refused: grouped GDN projections
extern const Architecture kGlm4MoeArchitecture;             // Glm4MoeForCausalLM (GLM-4.5 / 4.5-Air / 4.6)
extern const Architecture kGemma4Architecture;              // Gemma4ForCausalLM
extern const Architecture kGemma4MultimodalArchitecture;    // Gemma4ForConditionalGeneration (text part)

// The registration table (architectures.cc).
const std::vector<const Architecture*>& architectures();
// The entry named `name` (config.architecture); kInternal error when absent.
const Architecture& architecture_named(const std::string& name);

// Picks the architecture named by config.json and parses the whole ModelConfig
// (common keys, architecture keys, rope scaling, eos ids, MTP layout).
ModelConfig parse_model_config(const Checkpoint& ckpt);

// Shared helpers for architecture files.
// rope_scaling, or (newer transformers) the rope_type and factors in rope_parameters.
void parse_rope_scaling(const ConfigReader& reader, ModelConfig& config);
// A RoPE key (rope_theta, partial_rotary_factor): inside rope_parameters where newer
// transformers save it, else at the top level, else `fallback`.
double rope_parameter(const ConfigReader& reader, const char* key, double fallback);
// One uniform attention LayerSpec per layer from the flat fields of `config`.
void fill_uniform_layers(ModelConfig& config);
// Number of model.mtp_layers.{i}.* layers in the checkpoint (MiMo layout).
int count_mimo_mtp_layers(const Checkpoint& ckpt);

}  // namespace nextn
