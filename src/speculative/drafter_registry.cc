// speculative/drafter_registry.cc — the table of drafters: one line each.
#include <functional>
#include <utility>

#include "speculative/drafter.h"
#include <fmt/ranges.h>

#include "util/error.h"

namespace nextn {

namespace {
using Factory = std::unique_ptr<Drafter> (*)(Model&, const SpeculativeOptions&);
const std::pair<const char*, Factory> kDrafters[] = {
    {"mtp", make_mtp_drafter},              // MTP layers inside the checkpoint
    {"assistant", make_assistant_drafter},  // MTP layers from --mtp-assistant-model
    {"draft", make_draft_model_drafter},    // an independent smaller model (an EAGLE-3 checkpoint: eagle3)
    {"eagle3", make_eagle3_drafter},        // EAGLE-3: one layer over three target layer inputs
    {"ngram", make_ngram_drafter},          // prompt lookup in the sequence's own tokens
    {"suffix", make_suffix_drafter},        // suffix decoding over the sequence and earlier outputs
    {"dflash", make_dflash_drafter},        // a DFlash block-diffusion drafter (--draft-model)
};
}  // namespace

std::vector<std::string> drafter_names() {
  std::vector<std::string> names;
  for (auto& [name, factory] : kDrafters) names.push_back(name);
  return names;
}

std::unique_ptr<Drafter> make_drafter(Model& target, const SpeculativeOptions& options) {
  if (options.mode.empty() || options.mode == "none") return nullptr;
  if (const size_t plus = options.mode.find('+'); plus != std::string::npos) {
    SpeculativeOptions base = options, takeover = options;
    base.mode = options.mode.substr(0, plus);
    takeover.mode = options.mode.substr(plus + 1);
    if (base.mode.empty() || takeover.mode.empty() || takeover.mode.find('+') != std::string::npos)
      fail(ErrorKind::kBadInput, "drafter '{}': a chain is BASE+TAKEOVER", options.mode);
    return make_chain_drafter(make_drafter(target, base), make_drafter(target, takeover));
  }
  for (auto& [name, factory] : kDrafters)
    if (options.mode == name) return factory(target, options);
  fail(ErrorKind::kBadInput, "unknown drafter '{}' (known: {})", options.mode, fmt::join(drafter_names(), ", "));
}

}  // namespace nextn
