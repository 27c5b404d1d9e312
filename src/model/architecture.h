// model/architecture.h — the architecture registry. Each supported architecture is
// one file (llama.cc, qwen2.cc, ...) defining an Architecture, plus one line in the
// table of architectures.cc. All share the generic decoder (decoder_model.cc); an
// architecture only says which config keys and tensor variants it uses.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"
#include "model/config_reader.h"

namespace nextn {

class Checkpoint;

struct Architecture {
  const char* name;        // config.json "architectures"[0], e.g. "Qwen3ForCausalLM"
  const char* model_type;  // config.json "model_type", e.g. "qwen3"
  // Sets the architecture's own fields; the common keys are already parsed into `config`.
  void (*configure)(const ConfigReader& reader, const Checkpoint& ckpt, ModelConfig& config);
};

// Defined one per file.
extern const Architecture kLlamaArchitecture;
extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kMiMoArchitecture;

// The registration table (architectures.cc).
const std::vector<const Architecture*>& architectures();

// Picks the architecture named by config.json and parses the whole ModelConfig
// (common keys, architecture keys, rope scaling, eos ids, MTP layout).
ModelConfig parse_model_config(const Checkpoint& ckpt);

// Shared helpers for architecture files.
void parse_rope_scaling(const ConfigReader& reader, ModelConfig& config);
// Number of model.mtp_layers.{i}.* layers in the checkpoint (MiMo layout).
int count_mimo_mtp_layers(const Checkpoint& ckpt);

}  // namespace nextn
