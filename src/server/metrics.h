// server/metrics.h — server-side counters and the /metrics (Prometheus text)
// and /health (JSON) renderings of them plus the engine's statistics, and the
// replica's readiness (ready / full / draining) a load balancer acts on.
// Metric names use the `nextn:` prefix; speculative-decoding counters follow
// vLLM's names (spec_decode_num_drafts_total, ..._per_pos_total{position}). The load
// signals also appear under vLLM's own names (vllm:num_requests_waiting, ...), the
// ones the Kubernetes Gateway API inference extension's endpoint picker scrapes.
#pragma once
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "server/backend.h"
#include "server/generation.h"
#include "util/process_memory.h"

namespace nextn::server {

struct ServerCounters {
  std::atomic<uint64_t> http_requests{0};
  std::atomic<uint64_t> http_errors{0};       // 4xx/5xx answers
  std::atomic<uint64_t> completions_ok{0};    // generation requests finished normally
  std::atomic<uint64_t> completions_failed{0};
  std::atomic<uint64_t> rejected_overload{0}; // 503: queue full
  std::atomic<uint64_t> cancelled{0};         // client disconnects
  std::atomic<uint64_t> prompt_tokens_cached{0};
  std::atomic<uint64_t> streams_active{0};
};

struct MetricsInput {
  const ModelInfo* info = nullptr;  // null while loading
  EngineStats engine;
  const ServerCounters* counters = nullptr;
  ProcessMemory memory;
  double uptime_s = 0;
  bool draining = false;  // SIGTERM received: finishing in-flight work, taking no more from a balancer
};

// What /health reports: `ready` (200) takes work; `full` (503: every slot busy and the
// queue at --queue-size, so the next request would be refused) and `draining` (503:
// shutting down) tell a balancer's health check to send work elsewhere.
enum class Readiness { kReady, kFull, kDraining };
Readiness readiness(const MetricsInput& in);
const char* readiness_name(Readiness r);

std::string render_metrics(const MetricsInput& in);
nlohmann::ordered_json render_health(const MetricsInput& in);

}  // namespace nextn::server
