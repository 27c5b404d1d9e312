// model/architectures.cc — the table of supported architectures (one line each).
#include "model/architecture.h"

namespace nextn {

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> table = {
      &kLlamaArchitecture,
      &kQwen2Architecture,
      &kQwen3Architecture,
      &kMiMoArchitecture,
  };
  return table;
}

}  // namespace nextn
