// server/metrics.cc — Prometheus exposition text, the /health document and the
// replica's readiness.
#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace nextn::server {

using json = nlohmann::ordered_json;

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += fmt::format("# HELP nextn:{} {}\n# TYPE nextn:{} {}\nnextn:{} {}\n", name, help, name, type, name, value);
}

// The same value under the name vLLM gives it, labelled with the model like vLLM's. Balancers
// and autoscalers built for vLLM (the inference gateway's endpoint picker, dashboards,
// HPA rules) then read a nextn replica without a mapping of their own.
void vllm_metric(std::string& out, const char* name, const char* type, const char* help, const std::string& model,
                 double value) {
  out += fmt::format("# HELP vllm:{} {}\n# TYPE vllm:{} {}\nvllm:{}{{model_name=\"{}\"}} {}\n", name, help, name, type,
                     name, model, value);
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// Fraction (0..1) of the KV room the running sequences hold: their tokens out of
// parallel × ctx_size. Idle slots' cached prefixes are free to reuse, so they do not count.
double kv_usage(const MetricsInput& in) {
  if (!in.info) return 0.0;
  double capacity = double(in.info->parallel) * double(in.info->n_ctx);
  return std::min(1.0, ratio(double(in.engine.kv_tokens_active), capacity));
}

// Label values are the model's name: escape what the exposition format requires.
std::string label_value(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

double compression(const EngineStats& e) {
  return e.kv_bytes_used > 0 ? double(e.kv_bytes_f16_equivalent) / double(e.kv_bytes_used) : 1.0;
}

}  // namespace

std::string render_metrics(const MetricsInput& in) {
  const EngineStats& e = in.engine;
  const ServerCounters& c = *in.counters;
  std::string out;
  metric(out, "requests_total", "counter", "Generation requests accepted by the engine", double(e.requests_total));
  metric(out, "requests_success_total", "counter", "Generation requests finished normally", double(c.completions_ok));
  metric(out, "requests_failed_total", "counter", "Generation requests that ended in an error", double(c.completions_failed));
  metric(out, "requests_rejected_total", "counter", "Requests refused with 503 because the queue was full",
         double(c.rejected_overload));
  metric(out, "requests_cancelled_total", "counter", "Generations cancelled because the client disconnected",
         double(c.cancelled));
  metric(out, "http_requests_total", "counter", "HTTP requests received", double(c.http_requests));
  metric(out, "http_errors_total", "counter", "HTTP requests answered with an error status", double(c.http_errors));
  metric(out, "requests_running", "gauge", "Sequences decoding now", double(e.requests_active));
  metric(out, "requests_waiting", "gauge", "Requests waiting in the queue", double(e.requests_queued));
  metric(out, "prompt_tokens_total", "counter", "Prompt tokens processed", double(e.prompt_tokens_total));
  metric(out, "prompt_tokens_cached_total", "counter", "Prompt tokens reused from the prefix cache",
         double(c.prompt_tokens_cached));
  metric(out, "generation_tokens_total", "counter", "Tokens generated", double(e.generated_tokens_total));
  metric(out, "prompt_seconds_total", "counter", "Seconds spent on prompt processing", e.prompt_seconds_total);
  metric(out, "generation_seconds_total", "counter", "Seconds spent decoding", e.decode_seconds_total);
  metric(out, "prompt_tokens_per_second", "gauge", "Average prompt throughput",
         ratio(double(e.prompt_tokens_total), e.prompt_seconds_total));
  metric(out, "generation_tokens_per_second", "gauge", "Average decode throughput",
         ratio(double(e.generated_tokens_total), e.decode_seconds_total));
  metric(out, "process_resident_memory_bytes", "gauge", "Resident set size", double(in.memory.rss));
  metric(out, "process_peak_resident_memory_bytes", "gauge", "Peak resident set size", double(in.memory.peak_rss));
  metric(out, "kv_cache_bytes", "gauge", "Bytes the KV caches hold now", double(e.kv_bytes_used));
  metric(out, "kv_cache_f16_equivalent_bytes", "gauge", "Bytes the same KV entries would take in F16",
         double(e.kv_bytes_f16_equivalent));
  metric(out, "kv_cache_compression_ratio", "gauge", "F16-equivalent bytes / stored bytes", compression(e));
  metric(out, "recurrent_state_bytes", "gauge", "Bytes of the recurrent (linear-attention) layer states",
         double(e.recurrent_bytes));
  metric(out, "recurrent_snapshot_bytes", "gauge", "Bytes of recurrent states kept for speculative rollback",
         double(e.snapshot_bytes));
  metric(out, "sequence_state_bytes_max", "gauge",
         "Largest per-sequence state: attention KV + recurrent state + snapshots", double(e.state_bytes_per_sequence_max));
  metric(out, "spec_decode_num_drafts_total", "counter", "Speculative verification steps", double(e.speculative.drafts));
  metric(out, "spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed", double(e.speculative.draft_tokens));
  metric(out, "spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted (bonus excluded)",
         double(e.speculative.accepted));
  if (!e.speculative.accepted_per_pos.empty()) {
    out += "# HELP nextn:spec_decode_num_accepted_tokens_per_pos_total Verification steps whose draft at position k was accepted\n";
    out += "# TYPE nextn:spec_decode_num_accepted_tokens_per_pos_total counter\n";
    for (size_t k = 0; k < e.speculative.accepted_per_pos.size(); ++k)
      out += fmt::format("nextn:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{}\"}} {}\n", k,
                         e.speculative.accepted_per_pos[k]);
  }
  if (!e.speculative.by_drafter.empty()) {
    // A chained drafter (mtp+suffix): what each part proposed and got accepted.
    for (const auto& [name, help, field] :
         {std::tuple{"spec_decode_num_draft_tokens_by_drafter_total", "Draft tokens proposed, per part of a chained drafter",
                     &SpeculativeCounters::PerDrafter::draft_tokens},
          std::tuple{"spec_decode_num_accepted_tokens_by_drafter_total",
                     "Draft tokens accepted, per part of a chained drafter", &SpeculativeCounters::PerDrafter::accepted},
          std::tuple{"spec_decode_num_drafts_by_drafter_total", "Verification steps, per part of a chained drafter",
                     &SpeculativeCounters::PerDrafter::drafts}}) {
      out += fmt::format("# HELP nextn:{} {}\n# TYPE nextn:{} counter\n", name, help, name);
      for (const auto& d : e.speculative.by_drafter)
        out += fmt::format("nextn:{}{{drafter=\"{}\"}} {}\n", name, d.name, d.*field);
    }
  }
  if (!e.draft_depths.empty()) {
    // A Prometheus histogram of the drafts per decode step (0: a plain row), one bucket a depth.
    out += "# HELP nextn:spec_decode_draft_depth Drafts per decode step of drafting requests, as chosen each step\n";
    out += "# TYPE nextn:spec_decode_draft_depth histogram\n";
    uint64_t count = 0, sum = 0;
    for (size_t k = 0; k < e.draft_depths.size(); ++k) {
      count += e.draft_depths[k];
      sum += uint64_t(k) * e.draft_depths[k];
      out += fmt::format("nextn:spec_decode_draft_depth_bucket{{le=\"{}\"}} {}\n", k, count);
    }
    out += fmt::format("nextn:spec_decode_draft_depth_bucket{{le=\"+Inf\"}} {}\n", count);
    out += fmt::format("nextn:spec_decode_draft_depth_sum {}\nnextn:spec_decode_draft_depth_count {}\n", sum, count);
  }
  metric(out, "uptime_seconds", "gauge", "Seconds since the server started", in.uptime_s);
  metric(out, "queue_capacity", "gauge", "Requests that may wait for a slot (--queue-size)",
         double(in.info ? in.info->queue_size : 0));
  metric(out, "kv_cache_usage_ratio", "gauge", "Fraction of parallel x ctx_size tokens held by running sequences",
         kv_usage(in));
  metric(out, "draining", "gauge", "1 after SIGTERM: finishing in-flight requests, /health answers 503",
         in.draining ? 1.0 : 0.0);
  // The Gateway API inference extension's model server protocol (TotalQueuedRequests,
  // TotalRunningRequests, KVCacheUtilization) under vLLM's names, and vLLM's prefix-cache
  // counters (in tokens) for a cache-hit rate per replica.
  if (in.info) {
    std::string model = label_value(in.info->id);
    vllm_metric(out, "num_requests_waiting", "gauge", "Requests waiting in the queue (= nextn:requests_waiting)",
                model, double(e.requests_queued));
    vllm_metric(out, "num_requests_running", "gauge", "Sequences decoding now (= nextn:requests_running)", model,
                double(e.requests_active));
    vllm_metric(out, "kv_cache_usage_perc", "gauge", "KV-cache usage, 1 means full (= nextn:kv_cache_usage_ratio)",
                model, kv_usage(in));
    vllm_metric(out, "prefix_cache_queries_total", "counter",
                "Prompt tokens looked up in the prefix cache (nextn:prompt_tokens_total + ..._cached_total)", model,
                double(e.prompt_tokens_total + c.prompt_tokens_cached));
    vllm_metric(out, "prefix_cache_hits_total", "counter",
                "Prompt tokens found in the prefix cache (= nextn:prompt_tokens_cached_total)", model,
                double(c.prompt_tokens_cached));
  }
  return out;
}

Readiness readiness(const MetricsInput& in) {
  if (in.draining) return Readiness::kDraining;
  if (in.info) {
    // The engine refuses a request once every slot is busy and --queue-size wait: the
    // same condition, so a balancer stops sending before requests bounce.
    const EngineStats& e = in.engine;
    if (e.requests_active >= uint64_t(in.info->parallel) && e.requests_queued >= uint64_t(in.info->queue_size))
      return Readiness::kFull;
  }
  return Readiness::kReady;
}

const char* readiness_name(Readiness r) {
  switch (r) {
    case Readiness::kReady: return "ready";
    case Readiness::kFull: return "full";
    case Readiness::kDraining: return "draining";
  }
  return "ready";
}

json render_health(const MetricsInput& in) {
  const EngineStats& e = in.engine;
  const ServerCounters& c = *in.counters;
  const ModelInfo& m = *in.info;
  json spec = {{"mode", m.speculative},
               {"num_draft_tokens", m.num_draft_tokens},
               {"num_drafts", e.speculative.drafts},
               {"num_draft_tokens_total", e.speculative.draft_tokens},
               {"num_accepted_tokens", e.speculative.accepted},
               {"acceptance_rate", ratio(double(e.speculative.accepted), double(e.speculative.draft_tokens))},
               {"mean_acceptance_length",
                e.speculative.drafts > 0 ? 1.0 + double(e.speculative.accepted) / double(e.speculative.drafts) : 1.0},
               {"accepted_per_pos", e.speculative.accepted_per_pos},
               {"steps_per_depth", e.draft_depths}};
  return {{"status", readiness_name(readiness(in))},
          {"model", m.id},
          {"model_path", m.path},
          {"uptime_s", in.uptime_s},
          {"slots", {{"parallel", m.parallel}, {"ctx_size", m.n_ctx}}},
          {"memory",
           {{"rss_bytes", in.memory.rss},
            {"peak_rss_bytes", in.memory.peak_rss},
            {"rss_gb", double(in.memory.rss) / 1e9},
            {"peak_rss_gb", double(in.memory.peak_rss) / 1e9}}},
          {"requests",
           {{"total", e.requests_total},
            {"active", e.requests_active},
            {"queued", e.requests_queued},
            {"queue_capacity", m.queue_size},
            {"succeeded", c.completions_ok.load()},
            {"failed", c.completions_failed.load()},
            {"rejected", c.rejected_overload.load()},
            {"cancelled", c.cancelled.load()},
            {"http_total", c.http_requests.load()}}},
          {"tokens",
           {{"prompt_total", e.prompt_tokens_total},
            {"prompt_cached_total", c.prompt_tokens_cached.load()},
            {"generated_total", e.generated_tokens_total},
            {"prompt_per_second", ratio(double(e.prompt_tokens_total), e.prompt_seconds_total)},
            {"generated_per_second", ratio(double(e.generated_tokens_total), e.decode_seconds_total)}}},
          {"kv_cache",
           {{"type", m.kv_type},
            {"bytes_used", e.kv_bytes_used},
            {"f16_equivalent_bytes", e.kv_bytes_f16_equivalent},
            {"compression_ratio", compression(e)},
            {"usage", kv_usage(in)}}},
          {"sequence_state",
           {{"attention_kv_bytes", e.kv_bytes_used},
            {"recurrent_bytes", e.recurrent_bytes},
            {"snapshot_bytes", e.snapshot_bytes},
            {"total_bytes", e.kv_bytes_used + e.recurrent_bytes + e.snapshot_bytes},
            {"per_sequence_max_bytes", e.state_bytes_per_sequence_max}}},
          {"speculative", spec}};
}

}  // namespace nextn::server
