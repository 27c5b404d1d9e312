// bench/client.cc — see client.h.
#include "bench/client.h"

#include <httplib.h>

#include "util/timer.h"

namespace nextn::bench {
namespace {

httplib::Client make_client(const std::string& url, double timeout_s) {
  httplib::Client c(url);
  c.set_connection_timeout(5);
  c.set_read_timeout(static_cast<time_t>(timeout_s));
  c.set_write_timeout(60);
  return c;
}

}  // namespace

Client::Client(const std::string& base_url, const std::string& api_key) : base_url_(base_url), api_key_(api_key) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

StreamResult Client::stream_chat(const nlohmann::json& messages, int max_tokens, double temperature, double timeout_s,
                                 const nlohmann::json& extra) {
  StreamResult r;
  nlohmann::json body = {{"model", model_id()},
                         {"messages", messages},
                         {"max_tokens", max_tokens},
                         {"temperature", temperature},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  auto client = make_client(base_url_, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!api_key_.empty()) req.set_header("Authorization", "Bearer " + api_key_);

  std::string buffer;
  bool done = false;
  Stopwatch watch;
  auto handle_frame = [&](const std::string& frame) {
    for (size_t pos = 0; pos < frame.size();) {
      size_t eol = frame.find('\n', pos);
      std::string line = frame.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
      pos = eol == std::string::npos ? frame.size() : eol + 1;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data:", 0) != 0) continue;
      std::string data = line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      auto chunk = nlohmann::json::parse(data, nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("error")) r.error = chunk["error"].dump();
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        r.prompt_tokens = chunk["usage"].value("prompt_tokens", 0);
        r.completion_tokens = chunk["usage"].value("completion_tokens", 0);
      }
      if (chunk.contains("timings")) r.timings = chunk["timings"];
      if (chunk.contains("choices") && chunk["choices"].is_array() && !chunk["choices"].empty()) {
        const auto& delta = chunk["choices"][0].value("delta", nlohmann::json::object());
        std::string piece;
        for (const char* key : {"content", "reasoning_content"})
          if (delta.contains(key) && delta[key].is_string()) piece += delta[key].get<std::string>();
        if (!piece.empty()) {
          if (r.content_chunks == 0) r.ttft_s = watch.seconds();
          ++r.content_chunks;
          r.text += piece;
        }
      }
    }
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t sep; (sep = buffer.find("\n\n")) != std::string::npos;) {
      handle_frame(buffer.substr(0, sep));
      buffer.erase(0, sep + 2);
    }
    return true;
  };
  auto res = client.send(req);
  r.total_s = watch.seconds();
  if (!buffer.empty()) handle_frame(buffer);
  if (!res) {
    r.error = "request failed: " + httplib::to_string(res.error());
    return r;
  }
  if (res->status != 200) {
    // The error body went through the content receiver.
    r.error = "HTTP " + std::to_string(res->status) + " " + (buffer + res->body).substr(0, 300);
    return r;
  }
  r.ok = done && r.error.empty();
  if (!done && r.error.empty()) r.error = "stream ended without [DONE]";
  return r;
}

nlohmann::json Client::chat(const nlohmann::json& messages, int max_tokens, double temperature, double timeout_s) {
  nlohmann::json body = {{"model", model_id()}, {"messages", messages}, {"max_tokens", max_tokens},
                         {"temperature", temperature}};
  auto client = make_client(base_url_, timeout_s);
  httplib::Headers headers;
  if (!api_key_.empty()) headers.emplace("Authorization", "Bearer " + api_key_);
  auto res = client.Post("/v1/chat/completions", headers, body.dump(), "application/json");
  if (!res) return {{"error", {{"message", "request failed: " + httplib::to_string(res.error())}}}};
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return {{"error", {{"message", "HTTP " + std::to_string(res->status) + ": invalid JSON"}}}};
  return j;
}

std::optional<int> Client::count_tokens(const std::string& text) {
  auto client = make_client(base_url_, 120);
  httplib::Headers headers;
  if (!api_key_.empty()) headers.emplace("Authorization", "Bearer " + api_key_);
  nlohmann::json body = {{"content", text}, {"prompt", text}, {"add_special", false}};
  auto res = client.Post("/tokenize", headers, body.dump(), "application/json");
  if (!res || res->status != 200) return std::nullopt;
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  if (j.contains("tokens") && j["tokens"].is_array()) return static_cast<int>(j["tokens"].size());
  if (j.contains("count") && j["count"].is_number_integer()) return j["count"].get<int>();
  return std::nullopt;
}

std::optional<std::string> Client::get_text(const std::string& path) {
  auto client = make_client(base_url_, 10);
  httplib::Headers headers;
  if (!api_key_.empty()) headers.emplace("Authorization", "Bearer " + api_key_);
  auto res = client.Get(path.c_str(), headers);
  if (!res || res->status != 200) return std::nullopt;
  return res->body;
}

std::optional<nlohmann::json> Client::get_json(const std::string& path) {
  auto text = get_text(path);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string Client::model_id() {
  if (!model_.empty()) return model_;
  auto models = get_json("/v1/models");
  if (models && models->contains("data") && (*models)["data"].is_array() && !(*models)["data"].empty())
    return model_ = (*models)["data"][0].value("id", "default");
  return "default";
}

}  // namespace nextn::bench
