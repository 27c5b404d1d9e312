// cli/perf_model.h — the model measurements of `nextn perf --model`: decode, prefill and
// verify after a short prompt, and decode after long contexts (--contexts) whose KV rows
// are filled in directly instead of by a prefill.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kv/kv_cache.h"

namespace nextn {

struct ModelPerfOptions {
  std::string model;
  bool mmap_weights = false;
  std::vector<int> prefill = {512};  // prefill lengths, each one chunk
  int decode_steps = 32;
  int max_k = 8;
  int sequences = 1;  // verify: this many sequences, each with the k rows
  int repeats = 5;
  std::vector<int> contexts;  // decode after this many positions (empty: none)
  KvOptions kv;               // storage type of the attention caches
};

// Decode after a context of `context` positions.
struct ContextPerf {
  int context = 0;
  double decode_seconds = 0;  // per token, best of the repeats
  double kv_gb = 0;           // KV rows stored when decoding starts (what a step reads)
};

struct ModelPerf {
  std::string dir;
  std::string architecture;
  double weight_gb = 0;
  std::map<std::string, double> matrix_gb_by_type;  // stored type of the 2-D tensors → GB
  double load_seconds = 0;
  std::vector<double> prefill_seconds;  // one per ModelPerfOptions::prefill, in that order
  double decode_seconds = 0;            // per token
  std::vector<double> verify_seconds;  // index k-1: one forward over k rows of each sequence
  // Mixture of Experts: distinct experts run per routed layer in a decode step and in a
  // verify of k rows (index k-1); empty for dense models.
  double decode_experts = 0;
  std::vector<double> verify_experts;
  // Rolling a verify of max_k rows back to its first row (one draft accepted): what the
  // rollback and the next decode step take beyond a plain decode step (recurrent layers
  // re-apply the kept row there); 0 when max_k is 1.
  double restore_seconds = 0;
  std::vector<ContextPerf> contexts;  // one per ModelPerfOptions::contexts, in that order
};

// Loads the model and measures it on the global thread pool.
ModelPerf measure_model(const ModelPerfOptions& options);

}  // namespace nextn
