// speculative/mtp_drafter.h — the MTP drafting path shared by in-checkpoint heads (--mtp)
// and assistant checkpoints (--mtp-assistant-model).
#pragma once
#include <memory>

#include "model/mtp_head.h"
#include "speculative/drafter.h"

namespace nextn {

// `owned` keeps an assistant head alive; `head` may point into the target.
std::unique_ptr<Drafter> make_mtp_head_drafter(const char* name, MtpHead* head, std::unique_ptr<MtpHead> owned,
                                               const ModelConfig& target_config, int draft_vocab);

}  // namespace nextn
