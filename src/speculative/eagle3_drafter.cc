// speculative/eagle3_drafter.cc — drafting with an EAGLE-3 checkpoint (--draft-model DIR
// holding one; model/eagle3_head.cc). The drafter is an MTP-like head over three target
// layer inputs, so it drafts through the batched MTP path (mtp_drafter.cc): one forward
// catches every sequence up on its accepted rows and gives its first draft, then one
// forward per further depth feeds back the head's own output.
#include "model/drafter_config.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "speculative/mtp_drafter.h"
#include "util/error.h"

namespace nextn {

std::unique_ptr<Drafter> make_eagle3_drafter(Model& target, const SpeculativeOptions& options) {
  const std::string& dir = options.draft_model_dir;
  if (dir.empty()) fail(ErrorKind::kBadInput, "eagle3: --draft-model names the EAGLE-3 checkpoint, none given");
  if (!MtpHead::is_eagle3(drafter_config(dir)))
    fail(ErrorKind::kBadInput, "{}: not an EAGLE-3 drafter (architectures LlamaForCausalLMEagle3, "
         "Eagle3LlamaForCausalLM, Eagle3Speculator or llama.cpp's eagle3 GGUF)", dir);
  std::unique_ptr<MtpHead> head = MtpHead::load_eagle3(dir, target);
  MtpHead* raw = head.get();
  return make_mtp_head_drafter("eagle3", raw, std::move(head), target.config(), options.draft_vocab);
}

}  // namespace nextn
