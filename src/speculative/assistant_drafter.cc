// speculative/assistant_drafter.cc — MTP drafting with the layers of a separate
// assistant checkpoint (--mtp-assistant-model); same path as in-checkpoint heads.
// Gemma 4 "-assistant" checkpoints draft over the target's KV instead
// (gemma4_assistant_drafter.cc).
#include <filesystem>

#include "model/drafter_config.h"
#include "model/gemma4_assistant.h"
#include "model/model.h"
#include "speculative/mtp_drafter.h"
#include "util/error.h"

namespace nextn {

std::unique_ptr<Drafter> make_assistant_drafter(Model& target, const SpeculativeOptions& options) {
  if (options.assistant_dir.empty()) fail(ErrorKind::kBadInput, "--mtp-assistant-model: no directory given");
  if (Gemma4Assistant::is_gemma4_assistant(drafter_config(options.assistant_dir))) return make_gemma4_assistant_drafter(target, options);
  std::unique_ptr<MtpHead> head = MtpHead::load_assistant(options.assistant_dir, target);
  MtpHead* raw = head.get();
  return make_mtp_head_drafter("assistant", raw, std::move(head), target.config(), options.draft_vocab);
}

}  // namespace nextn

namespace nextn {

int assistant_default_draft_tokens(const std::string& dir, int fallback) {
  const nlohmann::json config = drafter_config(dir);
  if (config.is_object() && config.contains("num_assistant_tokens") && config["num_assistant_tokens"].is_number_integer())
    return config["num_assistant_tokens"].get<int>();
  return Gemma4Assistant::is_gemma4_assistant(config) ? 4 : fallback;
}

}  // namespace nextn
