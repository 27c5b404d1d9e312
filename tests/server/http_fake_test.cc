// tests/server/http_fake_test.cc — the HTTP layer against a scripted fake backend:
// tool calls and <think> splitting through real HTTP (non-streamed and SSE), stop
// strings cancelling generation, 503 while loading, 401 without the key, /health
// "draining" while requests are still served.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "server/generation.h"
#include "server/server.h"

using json = nlohmann::ordered_json;
using namespace nextn;
using namespace nextn::server;

namespace {

// How the fake says token n came: steps of 2 drafts, the first step's second draft
// rejected (correction), every later step fully accepted (bonus).
void scripted_source(int n, TokenEvent& ev) {
  ev.drafts = 2;
  if (n < 2) {
    ev.position = n + 1;
    ev.source = n == 0 ? TokenSource::kDraft : TokenSource::kCorrection;
    return;
  }
  ev.position = (n - 2) % 3 + 1;
  ev.source = ev.position <= 2 ? TokenSource::kDraft : TokenSource::kBonus;
}

// Bytes are tokens; the "model" replies with a fixed script, one byte per step.
class FakeBackend : public Backend {
 public:
  explicit FakeBackend(std::string reply) : reply_(std::move(reply)) {
    info_.id = "fake";
    info_.path = "/models/fake";
    info_.n_ctx = 256;
    info_.vocab_size = 256;
    info_.kv_type = "f16";
    info_.speculative = "none";
  }
  ~FakeBackend() override { shutdown(); }

  const ModelInfo& info() const override { return info_; }
  std::vector<int32_t> tokenize(const std::string& text, bool, bool) const override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override { return std::string(ids.begin(), ids.end()); }
  std::string token_text(int32_t id) const override { return std::string(1, char(id)); }
  std::unique_ptr<TextDecoder> new_decoder(const std::vector<std::string>& stops) const override {
    struct Dec : TextDecoder {
      explicit Dec(const std::vector<std::string>& s) : m(s) {}
      StopMatcher m;
      bool hit = false;
      std::string partial;  // an incomplete UTF-8 sequence, held like the real decoder holds it
      std::string push(int32_t t) override {
        if (hit) return "";
        partial += char(t);
        size_t lead = partial.size() - 1;
        while (lead > 0 && (uint8_t(partial[lead]) & 0xC0) == 0x80) --lead;
        uint8_t c = uint8_t(partial[lead]);
        size_t need = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (partial.size() - lead < need) return "";
        std::string whole;
        whole.swap(partial);
        return m.feed(whole, hit);
      }
      std::string finish() override { return hit ? "" : m.flush(); }
      bool stopped() const override { return hit; }
    };
    return std::make_unique<Dec>(stops);
  }
  std::string apply_chat_template(const json& messages, const json&, bool, const json&,
                                  const jinja::RenderLimits&) const override {
    std::string out;
    for (const auto& m : messages) out += m["role"].get<std::string>() + ":" + m["content"].get<std::string>() + "\n";
    return out;
  }
  std::vector<int32_t> eos_tokens() const override { return {}; }

  uint64_t submit(GenerationRequest req) override {
    uint64_t id = ++next_;
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, req = std::move(req)] {
      Timings t;
      int n = 0;
      FinishReason reason = FinishReason::kLength;
      for (; n < int(reply_.size()) && n < req.max_tokens; ++n) {
        TokenEvent ev;
        ev.token = uint8_t(reply_[size_t(n)]);
        scripted_source(n, ev);
        if (TokenReply reply = req.on_token(ev); !reply) {
          reason = reply.finish();  // cancelled, or stop (a stop string)
          ++n;
          break;
        }
        if (n + 1 == int(reply_.size())) reason = FinishReason::kStop;
      }
      generated_ += n;
      t.predicted_n = n;
      req.on_done(reason, t, "");
    });
    return id;
  }
  void cancel(uint64_t) override {}
  EngineStats stats() const override { return {}; }
  void shutdown() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  std::atomic<int> generated_{0};

 private:
  std::string reply_;
  ModelInfo info_;
  std::atomic<uint64_t> next_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

struct Harness {
  explicit Harness(const std::string& reply, ServerOptions o = {}) {
    o.port = 0;
    o.log_requests = false;
    server = std::make_unique<HttpServer>(o);
    port = server->bind();
    thread = std::thread([this] { server->run(); });
    auto b = std::make_unique<FakeBackend>(reply);
    fake = b.get();
    server->set_backend(std::move(b));
  }
  ~Harness() {
    server->stop();
    thread.join();
  }
  httplib::Result post(const json& body, httplib::Headers h = {}) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c.Post("/v1/chat/completions", h, body.dump(), "application/json");
  }
  std::unique_ptr<HttpServer> server;
  FakeBackend* fake = nullptr;
  int port = 0;
  std::thread thread;
};

json chat_body(json extra = json::object()) {
  json b = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 500}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

std::vector<json> sse_events(const std::string& body) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    std::string payload = body.substr(pos + 6, end - pos - 6);
    out.push_back(payload == "[DONE]" ? json("[DONE]") : json::parse(payload));
    pos = end;
  }
  return out;
}

}  // namespace

TEST(HttpFake, ToolCallNonStreamed) {
  Harness h("I will call.<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>");
  json tools = {{{"type", "function"}, {"function", {{"name", "lookup"}, {"parameters", {{"type", "object"}}}}}}};
  auto r = h.post(chat_body({{"tools", tools}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "I will call.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "lookup");
  EXPECT_EQ(json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"q", "x"}}));
}

TEST(HttpFake, ToolCallStreamedAndReasoning) {
  Harness h("<think>plan</think>\n\n<tool_call>\n<function=lookup>\n<parameter=q>\nx\n</parameter>\n</function>\n</tool_call>");
  json tools = {{{"type", "function"}, {"function", {{"name", "lookup"}}}}};
  auto r = h.post(chat_body({{"tools", tools}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string reasoning, content;
  json calls;
  std::string finish;
  for (const auto& e : ev) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (c["delta"].contains("reasoning_content")) reasoning += c["delta"]["reasoning_content"].get<std::string>();
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) calls = c["delta"]["tool_calls"];
    if (c["finish_reason"].is_string()) finish = c["finish_reason"];
  }
  EXPECT_EQ(reasoning, "plan");
  EXPECT_EQ(content, "");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "lookup");
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"q\":\"x\"}");
  EXPECT_EQ(finish, "tool_calls");
  const json& usage = ev[ev.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_GT(usage["usage"]["completion_tokens"].get<int>(), 0);
}

// "nextn": {"token_sources": true} adds choices[0].nextn.tokens to streamed chunks: one
// entry per token, in order, with the fake's provenance, whose texts add up to the
// deltas; without it the stream has no such field and the same deltas.
TEST(HttpFake, TokenSourcesStreamed) {
  const std::string reply = "<think>why</think>Hello, w\xc3\xa9rld XY!";
  Harness h(reply);
  auto collect = [&](json extra) {
    auto r = h.post(chat_body(extra));
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    return sse_events(r->body);
  };
  auto deltas = [](const std::vector<json>& events, const char* key) {
    std::string s;
    for (const json& e : events)
      if (e.is_object() && e.contains("choices") && !e["choices"].empty()) {
        const json& d = e["choices"][0]["delta"];
        if (d.contains(key)) s += d[key].get<std::string>();
      }
    return s;
  };
  // Stop strings hold text back ("XY" might start "XYZ"); entries then carry text late.
  for (json stop : {json(nullptr), json("XYZ")}) {
    json base = {{"stream", true}};
    if (!stop.is_null()) base["stop"] = stop;
    auto plain = collect(base);
    json asked_body = base;
    asked_body["nextn"] = {{"token_sources", true}};
    auto asked = collect(asked_body);
    for (const json& e : plain) {
      if (e.is_object() && e.contains("choices") && !e["choices"].empty()) {
        EXPECT_FALSE(e["choices"][0].contains("nextn"));
      }
    }
    EXPECT_EQ(deltas(plain, "content"), "Hello, w\xc3\xa9rld XY!");
    EXPECT_EQ(deltas(asked, "content"), deltas(plain, "content"));
    EXPECT_EQ(deltas(asked, "reasoning_content"), "why");
    std::string content, reasoning;
    int n = 0;
    for (const json& e : asked) {
      if (!e.is_object() || !e.contains("choices") || e["choices"].empty() || !e["choices"][0].contains("nextn")) continue;
      for (const json& t : e["choices"][0]["nextn"]["tokens"]) {
        if (t.contains("content")) content += t["content"].get<std::string>();
        if (t.contains("reasoning")) reasoning += t["reasoning"].get<std::string>();
        if (!t.contains("source")) continue;  // text released at the end
        TokenEvent want;
        scripted_source(n++, want);
        EXPECT_EQ(t["source"], token_source_name(want.source)) << n;
        EXPECT_EQ(t["position"], want.position) << n;
        EXPECT_EQ(t["drafts"], want.drafts) << n;
      }
    }
    EXPECT_EQ(n, int(reply.size()));
    EXPECT_EQ(content, deltas(plain, "content"));
    EXPECT_EQ(reasoning, "why");
  }
  // A malformed option names itself.
  for (json bad : {json(5), json{{"token_sources", "yes"}}}) {
    auto r = h.post(chat_body({{"stream", true}, {"nextn", bad}}));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(json::parse(r->body)["error"]["param"], bad.is_object() ? "nextn.token_sources" : "nextn");
  }
}

TEST(HttpFake, StopStringCancelsGeneration) {
  std::string reply = "abcSTOP" + std::string(200, 'z');
  Harness h(reply);
  auto r = h.post(chat_body({{"stop", {"STOP"}}, {"stream", true}}));
  ASSERT_TRUE(r);
  std::string content;
  std::string finish;
  for (const auto& e : sse_events(r->body)) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["finish_reason"].is_string()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "abc");
  EXPECT_EQ(finish, "stop");
  h.fake->shutdown();
  EXPECT_EQ(h.fake->generated_.load(), 7);  // nothing generated after the stop string completed
}

// drain(): /health turns 503 "draining" for the balancer while requests are still answered.
TEST(HttpFake, DrainingHealthStillServes) {
  ServerOptions o;
  o.port = 0;
  HttpServer server(o);
  int port = server.bind();
  std::thread t([&] { server.run(); });
  server.set_backend(std::make_unique<FakeBackend>("ok"));
  httplib::Client c("127.0.0.1", port);
  auto ready = c.Get("/health");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(json::parse(ready->body)["status"], "ready");
  server.drain();
  auto draining = c.Get("/health");
  ASSERT_TRUE(draining);
  EXPECT_EQ(draining->status, 503);
  EXPECT_EQ(json::parse(draining->body)["status"], "draining");
  auto answer = c.Post("/v1/chat/completions", chat_body().dump(), "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  server.stop();
  t.join();
}

TEST(HttpFake, LoadingAndAuth) {
  ServerOptions o;
  o.port = 0;
  o.api_key = "k";
  HttpServer server(o);
  int port = server.bind();
  std::thread t([&] { server.run(); });
  httplib::Client c("127.0.0.1", port);
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  auto r = c.Post("/v1/chat/completions", {{"Authorization", "Bearer k"}}, chat_body().dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  server.set_backend(std::make_unique<FakeBackend>("ok"));
  EXPECT_EQ(c.Get("/health")->status, 200);
  auto denied = c.Post("/v1/chat/completions", chat_body().dump(), "application/json");
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["type"], "authentication_error");
  auto ok = c.Post("/v1/chat/completions", {{"Authorization", "Bearer k"}}, chat_body().dump(), "application/json");
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["choices"][0]["message"]["content"], "ok");
  auto missing = c.Get("/v1/nope", {{"Authorization", "Bearer k"}});
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], "unknown_route");
  server.stop();
  t.join();
}
