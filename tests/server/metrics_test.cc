// tests/server/metrics_test.cc — what a load balancer reads from a replica: the readiness
// /health reports (ready, full, draining) and the vLLM-named load metrics beside nextn's.
#include <gtest/gtest.h>

#include <regex>

#include "server/metrics.h"

using namespace nextn;
using namespace nextn::server;

namespace {

struct Fixture {
  ModelInfo info;
  ServerCounters counters;
  MetricsInput in;
  Fixture() {
    info.id = "tiny \"chat\"";
    info.parallel = 2;
    info.queue_size = 3;
    info.n_ctx = 100;
    in.info = &info;
    in.counters = &counters;
  }
};

double value(const std::string& text, const std::string& name) {
  std::smatch m;
  std::regex re("\n" + name + R"((\{[^}]*\})? (\S+)\n)");  // names are [a-z_:], nothing to escape
  EXPECT_TRUE(std::regex_search(text, m, re)) << name << " missing in\n" << text;
  return m.empty() ? -1 : std::stod(m[2]);
}

}  // namespace

TEST(Readiness, FullOnlyWhenSlotsAndQueueAreTaken) {
  Fixture f;
  EXPECT_EQ(readiness(f.in), Readiness::kReady);
  f.in.engine.requests_active = 2;  // every slot busy, queue still has room
  f.in.engine.requests_queued = 2;
  EXPECT_EQ(readiness(f.in), Readiness::kReady);
  f.in.engine.requests_queued = 3;  // the engine would refuse the next request
  EXPECT_EQ(readiness(f.in), Readiness::kFull);
  EXPECT_EQ(render_health(f.in)["status"], "full");
  f.in.draining = true;  // draining wins: the replica is leaving either way
  EXPECT_EQ(readiness(f.in), Readiness::kDraining);
  EXPECT_EQ(render_health(f.in)["status"], "draining");
  EXPECT_STREQ(readiness_name(Readiness::kReady), "ready");
}

TEST(Readiness, NoQueueMeansFullWhenEverySlotIsBusy) {
  Fixture f;
  f.info.queue_size = 0;
  f.in.engine.requests_active = 1;
  EXPECT_EQ(readiness(f.in), Readiness::kReady);
  f.in.engine.requests_active = 2;
  EXPECT_EQ(readiness(f.in), Readiness::kFull);
}

TEST(Metrics, VllmNamesCarryTheSameLoad) {
  Fixture f;
  f.in.engine.requests_active = 2;
  f.in.engine.requests_queued = 1;
  f.in.engine.kv_tokens_active = 50;  // of 2 x 100
  f.in.engine.prompt_tokens_total = 30;
  f.counters.prompt_tokens_cached = 10;
  std::string text = "\n" + render_metrics(f.in);
  EXPECT_EQ(value(text, "vllm:num_requests_waiting"), 1);
  EXPECT_EQ(value(text, "vllm:num_requests_running"), 2);
  EXPECT_EQ(value(text, "vllm:kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(value(text, "nextn:kv_cache_usage_ratio"), 0.25);
  EXPECT_EQ(value(text, "vllm:prefix_cache_queries_total"), 40);
  EXPECT_EQ(value(text, "vllm:prefix_cache_hits_total"), 10);
  EXPECT_EQ(value(text, "nextn:queue_capacity"), 3);
  EXPECT_EQ(value(text, "nextn:draining"), 0);
  // The model name is a label value: quotes escaped per the exposition format.
  EXPECT_NE(text.find(R"(vllm:num_requests_waiting{model_name="tiny \"chat\""} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE vllm:kv_cache_usage_perc gauge"), std::string::npos);
  EXPECT_NE(text.find("# TYPE vllm:prefix_cache_hits_total counter"), std::string::npos);
}

TEST(Metrics, KvUsageStaysWithinOne) {
  Fixture f;
  f.in.engine.kv_tokens_active = 1000;
  EXPECT_EQ(value("\n" + render_metrics(f.in), "vllm:kv_cache_usage_perc"), 1);
}
