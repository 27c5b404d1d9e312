// model/decoder_model.h — the one Model implementation: a decoder-only model
// (embedding, one Block per layer as ModelConfig::layers specifies, final RMSNorm,
// lm_head) configured by the architecture registry. MtpHead implementations borrow its
// embedding and lm_head.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/decoder_block.h"
#include "model/model.h"
#include "model/mtp_head.h"

namespace nextn {

class DecoderModel : public Model {
 public:
  DecoderModel(std::unique_ptr<Checkpoint> ckpt, const LoadOptions& options);
  ~DecoderModel() override;

  const ModelConfig& config() const override { return config_; }
  const std::string& dir() const override { return dir_; }
  size_t weight_bytes() const override { return weight_bytes_; }
  std::unique_ptr<SequenceState> new_state(int max_tokens, const KvOptions& options) const override;
  void forward(std::span<SequenceRows> sequences, ForwardResult& result) override;
  void capture_streams(std::vector<int> streams) override;
  const std::vector<int>& captured_streams() const override { return streams_; }
  MtpHead* mtp_head() override { return mtp_.get(); }
  RoutedStats routed_stats() const override;

  // Shared with MTP heads.
  const WeightMatrix& embedding() const { return embedding_; }
  const WeightMatrix& lm_head() const { return lm_head_; }
  const BlockShape& block_shape() const { return block_shape_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  bool copy_weights() const { return copy_weights_; }

 private:
  // One pass of every layer over the rows (each sequence within its state's
  // max_rows_per_forward()); forward() splits longer prefills into such pieces.
  void forward_rows(std::span<SequenceRows> sequences, ForwardResult& result);
  // Copies the hidden rows of stream slot `slot` from x_ into result.streams.
  void copy_stream(std::span<SequenceRows> sequences, int slot, ForwardResult& result) const;

  ModelConfig config_;
  std::string dir_;
  bool copy_weights_ = true;
  std::unique_ptr<Checkpoint> ckpt_;  // kept while weights are served from its mmap
  WeightStore store_;
  BlockShape block_shape_;
  std::vector<float> inv_freq_;
  WeightMatrix embedding_;
  WeightMatrix lm_head_;
  const float* final_norm_ = nullptr;
  std::vector<std::unique_ptr<Block>> layers_;
  std::unique_ptr<InputStage> input_stage_;  // the architecture's per-layer inputs, or null
  std::vector<LayerStateSpec> state_layout_;  // what each layer keeps per sequence
  size_t weight_bytes_ = 0;
  std::unique_ptr<MtpHead> mtp_;
  std::vector<int> streams_;  // residual streams returned with the hidden rows (capture_streams)

  // Scratch reused across calls.
  BlockScratch scratch_;
  std::vector<float> x_, gathered_, normed_, layer_inputs_;
  std::vector<int32_t> positions_, tokens_, axes_;  // axes_: [rows, 3] M-RoPE positions
  std::vector<int32_t> image_end_;                  // [rows]: BlockRows::image_end
  std::vector<StateSegment> segments_;
};

// What a layer keeps per sequence, from its specification.
LayerStateSpec layer_state_spec(const LayerSpec& layer);

// Layout details of an MTP head bound from a checkpoint (mtp_head.cc).
struct MtpHeadConfig {
  MtpLayout layout = MtpLayout::kNone;
  MtpNames names;                           // where the tensors are, how the pair is joined
  const ModelConfig* config = nullptr;      // the model's (norm offset, layer kinds); null: a flat assistant
  LayerSpec layer;                          // the spec of each MTP layer (with config)
  const struct Architecture* arch = nullptr;  // builds the MTP layers where it has its own block (Qwen3.5)
  int num_layers = 0;
  int first_index = 0;  // tensor index of layer 0 ("{i}" of MtpNames is first_index + i)
  BlockShape block;
  std::vector<float> inv_freq;
};
// The MTP head of a model of config `c` (its layers shaped as the trunk's attention
// layers, routed when the trunk's are); `c` must outlive the head.
MtpHeadConfig mtp_head_spec(const ModelConfig& c);
// Binds and validates every tensor of the head from `store`. The target must outlive
// the head; `keep_alive` holds whatever backs the store (assistant checkpoints).
std::unique_ptr<MtpHead> make_mtp_head(const MtpHeadConfig& spec, const DecoderModel& target, WeightStore& store,
                                       std::shared_ptr<void> keep_alive = nullptr);

}  // namespace nextn
