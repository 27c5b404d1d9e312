// bench/measurement.h — one benchmark request's figures, and their aggregate over
// --repeat runs (median, min, max).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/client.h"

namespace nextn::bench {

struct Measurement {
  std::string config_key, config_name, prompt;
  int context = 0, run = 0;
  std::string status = "ok";  // ok | FAIL | OOM
  std::string error;
  double ttft_s = 0, total_s = 0;
  double tps = 0;          // (completion_tokens - 1) / (total - ttft); several clients: their mean
  int clients = 1;         // requests sent at once (--concurrency)
  double aggregate_tps = 0;  // every client's completion tokens / (first send → last [DONE])
  bool tps_from_server = false;  // content came in one burst: the server's predicted_per_second
  bool ttft_from_server = false;  // TTFT is the server's prompt_ms (text came later or not at all)
  double image_ms = 0;     // the server's vision encoder time for the request's pictures (inside TTFT)
  double prefill_tps = 0;  // prompt tokens / TTFT (server prompt_per_second when given)
  int prompt_tokens = 0, completion_tokens = 0, content_chunks = 0, cache_tokens = 0;
  double rss_mb = 0, peak_rss_mb = 0;
  double kv_bytes = 0;
  std::string kv_type;
  int draft_n = 0, draft_accepted = 0, draft_steps = 0;
  std::vector<double> accept_per_pos;  // P(draft at position k accepted | drafted)
  double server_predicted_per_second = 0;
  double synthetic_accept = -1;

  double accept_rate() const { return draft_n > 0 ? static_cast<double>(draft_accepted) / draft_n : -1; }
  double mean_accepted_length() const {
    return draft_steps > 0 ? 1.0 + static_cast<double>(draft_accepted) / draft_steps : -1;
  }
  nlohmann::json to_json() const;
};

// Fills the token/timing fields of `m` from a finished stream and its `timings`.
void fill_from_stream(Measurement& m, const StreamResult& r);
// One measurement of `parts.size()` clients sent at once that took `wall_s` from the
// first send to the last [DONE]: per-client figures (TPS, TTFT, prefill, the server's own
// decode rate) averaged, tokens and drafts summed.
Measurement merge_clients(const std::vector<Measurement>& parts, double wall_s);

struct Summary {
  std::string config_key, config_name, prompt;
  int context = 0;
  std::string status;  // ok, or the first failure's status
  int runs = 0;
  double tps_median = 0, tps_min = 0, tps_max = 0;
  int clients = 1;
  double aggregate_tps_median = 0, aggregate_tps_min = 0, aggregate_tps_max = 0;
  double ttft_median = 0, prefill_tps_median = 0;
  double rss_mb = 0, peak_rss_mb = 0, kv_bytes = 0;
  double accept_rate = -1, mean_len = -1;
  std::vector<double> accept_per_pos;
  nlohmann::json to_json() const;
};

std::vector<Summary> summarize(const std::vector<Measurement>& measurements);

}  // namespace nextn::bench
