// speculative/mtp_drafter.h — the MTP drafting path shared by in-checkpoint heads (--mtp)
// and assistant checkpoints (--mtp-assistant-model).
#pragma once
#include <memory>

#include "model/mtp_head.h"
#include "speculative/drafter.h"

namespace nextn {

// When drafting resumes after steps without drafts (the planner chose depth 0), the head
// catches up at most this many of the rows it has not run and skips the older ones (a
// prompt's too, when the request's first decode step did not draft): running the head
// over every row of a long stretch of plain decoding (a routed MTP layer on MoE models: 16
// rows ran ~100 of 256 experts) made `auto` slower than never drafting. A drafting step
// catches up its accepted + 1 rows, all of them even when that is more than this.
constexpr int kMtpMaxCatchUp = 8;

// `owned` keeps an assistant head alive; `head` may point into the target.
std::unique_ptr<Drafter> make_mtp_head_drafter(const char* name, MtpHead* head, std::unique_ptr<MtpHead> owned,
                                               const ModelConfig& target_config, int draft_vocab);

}  // namespace nextn
