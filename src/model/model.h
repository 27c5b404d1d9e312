// model/model.h — a loaded decoder-only model and its batched forward pass.
// One Model serves every sequence: a forward call takes rows from one or more
// sequences (prefill chunks, decode rows, speculative verify rows), each sequence
// bringing its own KvCache. New rows are appended at kv->length(), so positions are
// implicit; rolling back is kv->truncate(n).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/config.h"

namespace nextn {

class Checkpoint;

struct LoadOptions {
  // Copy weights into allocated memory instead of serving them from the mmap
  // (mmap'd pages can be evicted and re-read; see docs/performance.md).
  bool copy_weights = true;
};

// The rows one sequence contributes to a forward call.
struct SequenceRows {
  KvCache* kv = nullptr;                 // appended to; positions start at kv->length()
  std::span<const int32_t> tokens;       // new tokens of this sequence
  std::vector<int> logit_rows;           // indices into tokens whose logits are wanted
  std::vector<int> hidden_rows;          // indices into tokens whose final hidden states are wanted
};

struct ForwardResult {
  // Concatenated over sequences, in call order, then in each list's order.
  std::vector<float> logits;        // [total logit rows, vocab_size]
  std::vector<float> hidden_pre;    // [total hidden rows, hidden_size] before the final norm
  std::vector<float> hidden_post;   // [total hidden rows, hidden_size] after the final norm
};

class MtpHead;

class Model {
 public:
  // Reads config.json, picks the architecture from the registry, validates and
  // binds every tensor. Throws nextn::Error naming the file and tensor/key.
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options = {});
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const std::string& dir() const = 0;
  // Bytes of weights read per decode step (for GB/s reporting).
  virtual size_t weight_bytes() const = 0;

  virtual std::unique_ptr<KvCache> new_kv_cache(int max_tokens, const KvOptions& options) const = 0;
  virtual void forward(std::span<SequenceRows> sequences, ForwardResult& result) = 0;

  // The MTP layers inside the checkpoint (nullptr when it has none).
  virtual MtpHead* mtp_head() = 0;
};

}  // namespace nextn
