// cli/logit_stats.h — comparing next-token distributions row by row against a reference
// (kv-eval: KV storage types; weight-eval: weight types): mean KL(reference ‖ candidate),
// the candidate's perplexity on the text, and top-1 agreement.
#pragma once
#include <cstdint>
#include <vector>

namespace nextn {

class LogitStats {
 public:
  // One row of logits [vocab] against the reference's row for the same position; `next`
  // is the text's next token (scored for perplexity), or −1 at the end of the text.
  void add(const float* reference, const float* row, int vocab, int32_t next);

  double mean_kl() const { return rows_ ? kl_sum_ / double(rows_) : 0.0; }
  double perplexity() const;
  double top1_agreement() const { return rows_ ? double(top1_same_) / double(rows_) : 0.0; }
  long rows() const { return rows_; }

 private:
  double kl_sum_ = 0, nll_sum_ = 0;
  long rows_ = 0, scored_ = 0, top1_same_ = 0;
  std::vector<double> lp_ref_, lp_;  // scratch
};

}  // namespace nextn
