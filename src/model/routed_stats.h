// model/routed_stats.h — what a model's routed layers (Mixture of Experts) have done:
// layer forwards, the distinct experts they ran and the rows they routed. Counted per
// layer, summed per model (Model::routed_stats); readers take differences around a
// forward (the speculator's verify-cost model, nextn perf).
#pragma once
#include <cstdint>

namespace nextn {

struct RoutedStats {
  uint64_t forwards = 0;          // routed-layer forwards
  uint64_t distinct_experts = 0;  // experts run, summed over those forwards
  uint64_t rows = 0;              // rows routed, summed over those forwards

  RoutedStats& operator+=(const RoutedStats& o) {
    forwards += o.forwards;
    distinct_experts += o.distinct_experts;
    rows += o.rows;
    return *this;
  }
  // Distinct experts per routed-layer forward since `start` (< 0: nothing was routed).
  double experts_per_forward_since(const RoutedStats& start) const {
    const uint64_t n = forwards - start.forwards;
    return n ? double(distinct_experts - start.distinct_experts) / double(n) : -1.0;
  }
};

}  // namespace nextn
