// Which time a benchmark request's first token gets: the client's first text, or the
// server's own prompt_ms when the text came later than one token after it.
#include "bench/measurement.h"

#include <gtest/gtest.h>

namespace nextn::bench {
namespace {

// A stream of `tokens` tokens over `total_s` seconds whose first text arrived at
// `first_text_s` (0 chunks: no text at all); the server says its first token came at
// `prompt_ms`.
StreamResult stream(double first_text_s, int chunks, double total_s, int tokens, double prompt_ms) {
  StreamResult r;
  r.ok = true;
  r.ttft_s = first_text_s;
  r.content_chunks = chunks;
  r.total_s = total_s;
  r.prompt_tokens = 100;
  r.completion_tokens = tokens;
  r.timings = {{"prompt_ms", prompt_ms}, {"prompt_per_second", 200.0}};
  return r;
}

TEST(BenchMeasurement, TextOnTimeKeepsTheClientsTime) {
  // 100 tokens over 2.5 s after a 0.5 s prefill: 25 ms a token; the text came 5 ms after.
  Measurement m;
  fill_from_stream(m, stream(0.505, 90, 3.0, 100, 500));
  EXPECT_DOUBLE_EQ(m.ttft_s, 0.505);
  EXPECT_FALSE(m.ttft_from_server);
  EXPECT_NEAR(m.tps, 99 / (3.0 - 0.505), 1e-12);
}

TEST(BenchMeasurement, LateTextTakesTheServersFirstToken) {
  // The first text came 0.3 s (twelve tokens) after the first token.
  Measurement m;
  fill_from_stream(m, stream(0.8, 40, 3.0, 100, 500));
  EXPECT_DOUBLE_EQ(m.ttft_s, 0.5);
  EXPECT_TRUE(m.ttft_from_server);
  EXPECT_NEAR(m.tps, 99 / 2.5, 1e-12);
}

TEST(BenchMeasurement, NoTextTakesTheServersFirstToken) {
  Measurement m;
  fill_from_stream(m, stream(0, 0, 3.0, 100, 500));
  EXPECT_DOUBLE_EQ(m.ttft_s, 0.5);
  EXPECT_TRUE(m.ttft_from_server);
}

TEST(BenchMeasurement, NoServerTimingsKeepTheClientsTime) {
  Measurement m;
  StreamResult r = stream(0.8, 40, 3.0, 100, 0);
  r.timings = nlohmann::json();
  fill_from_stream(m, r);
  EXPECT_DOUBLE_EQ(m.ttft_s, 0.8);
  EXPECT_FALSE(m.ttft_from_server);
}

}  // namespace
}  // namespace nextn::bench
