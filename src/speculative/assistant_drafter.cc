// speculative/assistant_drafter.cc — MTP drafting with the layers of a separate
// assistant checkpoint (--mtp-assistant-model); same path as in-checkpoint heads.
#include "model/model.h"
#include "speculative/mtp_drafter.h"
#include "util/error.h"

namespace nextn {

std::unique_ptr<Drafter> make_assistant_drafter(Model& target, const SpeculativeOptions& options) {
  if (options.assistant_dir.empty()) fail(ErrorKind::kBadInput, "--mtp-assistant-model: no directory given");
  std::unique_ptr<MtpHead> head = MtpHead::load_assistant(options.assistant_dir, target);
  MtpHead* raw = head.get();
  return make_mtp_head_drafter("assistant", raw, std::move(head), target.config(), options.draft_vocab);
}

}  // namespace nextn
