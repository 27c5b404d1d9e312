// model/architectures.cc — the table of supported architectures (one line each).
#include "model/architecture.h"

#include "util/error.h"

namespace nextn {

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> table = {
      &kLlamaArchitecture,
      &kQwen2Architecture,
      &kQwen3Architecture,
      &kMiMoArchitecture,
      &kQwen3_5Architecture,
      &kQwen3_5VisionLanguageArchitecture,
      &kQwen3_5MoeArchitecture,
      &kQwen3_5MoeTextArchitecture,
      &kQwen3NextArchitecture,
      &kGlm4MoeArchitecture,
      &kGemma4Architecture,
      &kGemma4MultimodalArchitecture,
  };
  return table;
}

const Architecture& architecture_named(const std::string& name) {
  for (const Architecture* a : architectures())
    if (name == a->name) return *a;
  fail(ErrorKind::kInternal, "no architecture named '{}'", name);
}

}  // namespace nextn
