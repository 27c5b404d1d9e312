// server/request.cc — validation of chat/completions request bodies.
#include "server/request.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "speculative/step.h"  // kMaxDraftsPerStep
#include "vision/data_url.h"

namespace nextn::server {

using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

// "messages[2].content[0].text" style paths for error messages.
std::string path(const std::string& base, size_t index) { return fmt::format("{}[{}]", base, index); }

bool starts_with_lower(const std::string& text, const char* prefix) {
  for (size_t i = 0; prefix[i]; ++i)
    if (i >= text.size() || std::tolower(static_cast<unsigned char>(text[i])) != prefix[i]) return false;
  return true;
}

// An image_url part ({"image_url": {"url": ...}}, or the Responses API's input_image
// with a string "image_url"): the data: URL decoded — or the http(s) URL fetched, when
// the server allows it — and checked against the limits.
ImageInput parse_image_part(const json& part, const std::string& p, size_t message, size_t index,
                            const ImageRequestLimits& limits, std::vector<ImageInput>& images) {
  auto field = part.find("image_url");
  std::string where = p + ".image_url";
  const json* url = nullptr;
  if (field != part.end() && field->is_string()) {
    url = &*field;
  } else if (field != part.end() && field->is_object()) {
    auto u = field->find("url");
    where += ".url";
    if (u != field->end()) url = &*u;
  } else {
    bad_field(where, "expected an object with a \"url\"");
  }
  if (!url || !url->is_string()) bad_field(where, "expected a string (a data: URL)");
  if (images.size() >= size_t(limits.max_images))
    bad_field(p, fmt::format("too many images: at most {} per request", limits.max_images));
  const std::string& text = url->get_ref<const std::string&>();
  ImageInput in;
  in.message = message;
  in.part = index;
  const bool remote = starts_with_lower(text, "http://") || starts_with_lower(text, "https://");
  if (remote && !limits.remote.enabled)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("{}: remote image URLs are not fetched by this server (start it with "
                               "--allow-remote-images); send the image inline as a data: URL "
                               "(data:image/png;base64,...)",
                               where),
                   where, "remote_image_url");
  if (!remote && !vision::is_data_url(text))
    bad_field(where, "expected a data: URL (data:image/png;base64,...) or an http(s) URL");
  try {
    if (remote) {
      // The sender's Content-Type names the format when it is an image type; the magic
      // number picks the decoder either way (vision/image.h decode_image).
      FetchedImage got = fetch_remote_image(text, limits.image.max_bytes, limits.remote);
      std::string media = got.media_type;
      if (vision::format_of_media_type(media) == vision::ImageFormat::kUnknown) {
        const vision::ImageFormat sniffed = vision::sniff_image_format(got.bytes);
        if (sniffed == vision::ImageFormat::kUnknown)
          fail(ErrorKind::kBadInput, "the host sent '{}', not a PNG, JPEG, WebP or GIF image",
               got.media_type.empty() ? "no Content-Type" : got.media_type.substr(0, 64));
        media = vision::media_type_of(sniffed);
      }
      in.image = vision::decode_image(got.bytes, media, limits.image);
    } else {
      vision::DataUrl data = vision::parse_data_url(text, limits.image.max_bytes);
      in.image = vision::decode_image(data.bytes, data.media_type, limits.image);
    }
  } catch (const Error& e) {
    bad_field(where, fmt::format("image {} of the request: {}", images.size(), e.what()));
  }
  int64_t total = int64_t(in.image.width) * in.image.height;
  for (const ImageInput& other : images) total += int64_t(other.image.width) * other.image.height;
  if (total > limits.max_total_pixels)
    bad_field(where, fmt::format("the request's images hold {} pixels together; the limit is {}", total,
                                 limits.max_total_pixels));
  return in;
}

// A message's content for the chat template: a string (text parts joined by newlines);
// with image parts, the list the template renders in order — {"type": "text", "text"}
// and {"type": "image"} items (the Qwen3.5 template writes
// <|vision_start|><|image_pad|><|vision_end|> for each image item).
json content_for_template(const json& content, const std::string& where, size_t message,
                          const ImageRequestLimits& limits, std::vector<ImageInput>& images) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_field(where, "expected a string or an array of content parts");
  std::string text;
  json items = json::array();
  const size_t images_before = images.size();
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string p = path(where, i);
    if (part.is_string()) {  // lenient: bare strings as text parts
      if (!text.empty()) text += "\n";
      text += part.get<std::string>();
      items.push_back({{"type", "text"}, {"text", part.get<std::string>()}});
      continue;
    }
    if (!part.is_object()) bad_field(p, "expected a content part object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) bad_field(p + ".type", "expected a string");
    const std::string t = type->get<std::string>();
    if (t == "text" || t == "input_text") {
      auto tx = part.find("text");
      if (tx == part.end() || !tx->is_string()) bad_field(p + ".text", "expected a string");
      if (!text.empty()) text += "\n";
      text += tx->get<std::string>();
      items.push_back({{"type", "text"}, {"text", tx->get<std::string>()}});
    } else if (t == "image_url" || t == "input_image") {
      images.push_back(parse_image_part(part, p, message, i, limits, images));
      items.push_back({{"type", "image"}});
    } else {
      throw ApiError(400, "invalid_request_error",
                     fmt::format("{}.type: content part '{}' is not supported (text and image_url)", p, t),
                     p + ".type", "unsupported_content");
    }
  }
  if (images.size() > images_before) return items;
  return text;
}

json parse_tool_calls(const json& calls, const std::string& where) {
  if (!calls.is_array()) bad_field(where, "expected an array");
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    std::string p = path(where, i);
    if (!c.is_object()) bad_field(p, "expected an object");
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) bad_field(p + ".function", "expected an object");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) bad_field(p + ".function.name", "expected a string");
    json args = fn->value("arguments", json("{}"));
    if (!args.is_string() && !args.is_object()) bad_field(p + ".function.arguments", "expected a JSON string or object");
    // Templates receive the arguments as an object when the string parses (as transformers users pass them).
    if (args.is_string()) {
      json parsed = json::parse(args.get<std::string>(), nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) args = parsed;
    }
    json call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}};
    if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
    out.push_back(call);
  }
  return out;
}

json parse_messages(const json& body, const ImageRequestLimits& limits, std::vector<ImageInput>& images) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) bad_field("messages", "is required");
  if (!it->is_array()) bad_field("messages", "expected an array of messages");
  if (it->empty()) bad_field("messages", "must contain at least one message");
  json out = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    std::string p = path("messages", i);
    if (!m.is_object()) bad_field(p, "expected a message object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad_field(p + ".role", "expected a string");
    std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
      bad_field(p + ".role", fmt::format("unknown role '{}' (system, developer, user, assistant, tool)", r));
    json msg = {{"role", r == "developer" ? "system" : r}};
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (r != "assistant") bad_field(p + ".content", "is required");
      msg["content"] = "";
    } else {
      msg["content"] = content_for_template(*content, p + ".content", i, limits, images);
    }
    if (r == "assistant") {
      if (m.contains("tool_calls") && !m["tool_calls"].is_null())
        msg["tool_calls"] = parse_tool_calls(m["tool_calls"], p + ".tool_calls");
      for (const char* key : {"reasoning_content", "reasoning"}) {
        if (m.contains(key) && m[key].is_string()) msg["reasoning_content"] = m[key];
      }
    }
    if (auto v = opt_string(m, "name", p)) msg["name"] = *v;
    if (auto v = opt_string(m, "tool_call_id", p)) msg["tool_call_id"] = *v;
    out.push_back(std::move(msg));
  }
  return out;
}

void parse_tools(const json& body, ParsedRequest& r) {
  if (body.contains("tools") && !body["tools"].is_null()) {
    const json& tools = body["tools"];
    if (!tools.is_array()) bad_field("tools", "expected an array");
    for (size_t i = 0; i < tools.size(); ++i) {
      const json& t = tools[i];
      std::string p = path("tools", i);
      if (!t.is_object()) bad_field(p, "expected an object");
      if (t.contains("type") && t["type"] != "function") bad_field(p + ".type", "only 'function' tools are supported");
      if (!t.contains("function") || !t["function"].is_object()) bad_field(p + ".function", "expected an object");
      const json& fn = t["function"];
      if (!fn.contains("name") || !fn["name"].is_string()) bad_field(p + ".function.name", "expected a string");
      if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object())
        bad_field(p + ".function.parameters", "expected a JSON schema object");
    }
    if (!tools.empty()) r.tools = tools;
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& tc = body["tool_choice"];
    if (tc.is_string()) {
      std::string s = tc.get<std::string>();
      if (s != "none" && s != "auto" && s != "required") bad_field("tool_choice", "expected none, auto, required or a function object");
      if (s == "none") r.tools = nullptr;
    } else if (tc.is_object()) {
      if (!tc.contains("function") || !tc["function"].is_object() || !tc["function"].contains("name") ||
          !tc["function"]["name"].is_string())
        bad_field("tool_choice.function.name", "expected a string");
      if (r.tools.is_array()) {  // keep only the named tool
        json only = json::array();
        for (const json& t : r.tools)
          if (t["function"]["name"] == tc["function"]["name"]) only.push_back(t);
        if (only.empty()) bad_field("tool_choice.function.name", "names no tool in 'tools'");
        r.tools = only;
      }
    } else {
      bad_field("tool_choice", "expected a string or an object");
    }
    r.tool_choice = tc;
  }
}

void parse_common(const json& body, const RequestDefaults& d, ParsedRequest& r) {
  if (auto v = opt_string(body, "model")) r.model = *v;
  if (auto n = opt_int(body, "n", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()); n && *n != 1)
    bad_field("n", "only n = 1 is supported");
  if (auto v = opt_int(body, "best_of", 1, 1)) (void)v;

  std::optional<int64_t> max_tokens = opt_int(body, "max_tokens", 1, kMaxInt32);
  if (auto v = opt_int(body, "max_completion_tokens", 1, kMaxInt32)) max_tokens = v;
  if (auto v = opt_int(body, "n_predict", -1, kMaxInt32); v && *v > 0 && !max_tokens) max_tokens = v;
  if (max_tokens) r.max_tokens = int(*max_tokens);

  SamplingParams& s = r.sampling;
  s = d.sampling;
  if (auto v = opt_number(body, "temperature", 0.0, 1e4)) s.temperature = float(*v);
  if (auto v = opt_number(body, "top_p", 0.0, 1.0)) {
    if (*v <= 0.0) bad_field("top_p", "must be greater than 0 and at most 1");
    s.top_p = float(*v);
  }
  if (auto v = opt_int(body, "top_k", -1, kMaxInt32)) s.top_k = *v < 0 ? 0 : int(*v);
  if (auto v = opt_number(body, "min_p", 0.0, 1.0)) s.min_p = float(*v);
  if (auto v = opt_number(body, "repetition_penalty", 0.0, 1e4)) {
    if (*v <= 0.0) bad_field("repetition_penalty", "must be greater than 0");
    s.repetition_penalty = float(*v);
  } else if (auto v2 = opt_number(body, "repeat_penalty", 0.0, 1e4)) {
    if (*v2 <= 0.0) bad_field("repeat_penalty", "must be greater than 0");
    s.repetition_penalty = float(*v2);
  }
  if (auto v = opt_number(body, "presence_penalty", -2.0, 2.0)) s.presence_penalty = float(*v);
  if (auto v = opt_number(body, "frequency_penalty", -2.0, 2.0)) s.frequency_penalty = float(*v);
  if (auto v = opt_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    if (*v != -1) {
      s.seed = uint64_t(*v);
      s.has_seed = true;
    }
  }

  if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
    const json& lb = body["logit_bias"];
    if (!lb.is_object()) bad_field("logit_bias", "expected an object mapping token ids to numbers");
    if (lb.size() > 1024) bad_field("logit_bias", "at most 1024 tokens");
    s.logit_bias.clear();
    for (auto& [key, v] : lb.items()) {
      const std::string where = "logit_bias." + key;
      if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
        bad_field(where, "expected a token id (a non-negative integer) as the key");
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < -100 || v.get<double>() > 100)
        bad_field(where, "expected a number between -100 and 100");
      s.logit_bias.emplace_back(int32_t(std::stol(key)), v.get<float>());
    }
  }

  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& st = body["stop"];
    if (st.is_string()) {
      if (!st.get<std::string>().empty()) r.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      if (st.size() > 16) bad_field("stop", "at most 16 stop sequences");
      for (size_t i = 0; i < st.size(); ++i) {
        if (!st[i].is_string()) bad_field(path("stop", i), "expected a string");
        if (!st[i].get<std::string>().empty()) r.stop.push_back(st[i].get<std::string>());
      }
    } else {
      bad_field("stop", "expected a string or an array of strings");
    }
    for (const auto& s2 : r.stop)
      if (s2.size() > 1024) bad_field("stop", "stop sequences are limited to 1024 bytes");
  }
  if (auto v = opt_bool(body, "ignore_eos")) r.ignore_eos = *v;
  if (auto v = opt_bool(body, "stream")) r.stream = *v;
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& so = body["stream_options"];
    if (!so.is_object()) bad_field("stream_options", "expected an object");
    if (auto v = opt_bool(so, "include_usage")) r.include_usage = *v;
  }

  // nextn extensions (field names as llama.cpp's server spells them where it has them).
  if (auto v = opt_bool(body, "speculative")) r.speculative = *v;
  if (auto v = opt_int(body, "num_draft_tokens", 0, kMaxDraftsPerStep)) {
    r.num_draft_tokens = int(*v);
    if (*v == 0) r.speculative = false;
  }
  if (auto v = opt_int(body, "speculative.n_max", 0, kMaxDraftsPerStep)) {
    r.num_draft_tokens = int(*v);
    if (*v == 0) r.speculative = false;
  }
  // nextn's own options, in one object so they never meet a future OpenAI field.
  if (body.contains("nextn") && !body["nextn"].is_null()) {
    const json& ext = body["nextn"];
    if (!ext.is_object()) bad_field("nextn", "expected an object");
    if (ext.contains("token_sources") && !ext["token_sources"].is_null()) {
      if (!ext["token_sources"].is_boolean()) bad_field("nextn.token_sources", "expected true or false");
      r.token_sources = ext["token_sources"].get<bool>();
    }
  }
  auto bits = opt_int(body, "kv_bits", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  auto group = opt_int(body, "kv_group_size", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max());
  if (bits && *bits != 4 && *bits != 8) bad_field("kv_bits", "must be 4 or 8");
  if (group && *group != 32 && *group != 64 && *group != 128) bad_field("kv_group_size", "must be 32, 64 or 128");
  if (bits) {
    KvOptions kv = d.kv;
    kv.type = *bits == 8 ? KvType::kQ8 : KvType::kQ4;
    kv.group_size = group ? int(*group) : KvOptions{}.group_size;
    r.kv = kv;
    r.kv_group_size_given = group.has_value();
  }
}

}  // namespace

ParsedRequest parse_chat_request(const json& body, const RequestDefaults& defaults) {
  ParsedRequest r;
  r.chat = true;
  parse_common(body, defaults, r);
  r.messages = parse_messages(body, defaults.images, r.images);
  parse_tools(body, r);
  r.structured = parse_structured_output(body, r.tools, r.tool_choice, true, defaults.grammar);
  if (auto v = opt_bool(body, "logprobs")) r.logprobs = *v;
  if (auto v = opt_int(body, "top_logprobs", 0, 20)) {
    if (!r.logprobs && *v > 0) bad_field("top_logprobs", "requires logprobs: true");
    r.top_logprobs = int(*v);
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) bad_field("chat_template_kwargs", "expected an object");
    r.template_kwargs = body["chat_template_kwargs"];
  }
  if (auto v = opt_bool(body, "enable_thinking")) r.template_kwargs["enable_thinking"] = *v;
  if (auto v = opt_string(body, "reasoning_effort"); v && *v == "none") r.template_kwargs["enable_thinking"] = false;
  return r;
}

ParsedRequest parse_completion_request(const json& body, const RequestDefaults& defaults) {
  ParsedRequest r;
  r.chat = false;
  parse_common(body, defaults, r);
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) bad_field("prompt", "is required");
  const json& p = *it;
  auto read_ids = [&](const json& arr, const std::string& where) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < arr.size(); ++i) {
      if (!arr[i].is_number_integer() || arr[i].get<int64_t>() < 0 || arr[i].get<int64_t>() > kMaxInt32)
        bad_field(path(where, i), "expected a token id (non-negative integer)");
      ids.push_back(int32_t(arr[i].get<int64_t>()));
    }
    return ids;
  };
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
  } else if (p.is_array()) {
    if (p.empty()) bad_field("prompt", "must not be empty");
    if (p[0].is_string()) {
      if (p.size() != 1) bad_field("prompt", "only one prompt per request is supported");
      r.prompt_text = p[0].get<std::string>();
    } else if (p[0].is_number()) {
      r.prompt_tokens = read_ids(p, "prompt");
      r.prompt_is_tokens = true;
    } else if (p[0].is_array()) {
      if (p.size() != 1) bad_field("prompt", "only one prompt per request is supported");
      r.prompt_tokens = read_ids(p[0], "prompt[0]");
      r.prompt_is_tokens = true;
    } else {
      bad_field("prompt", "expected a string, an array of strings or token ids");
    }
  } else {
    bad_field("prompt", "expected a string, an array of strings or token ids");
  }
  if (r.prompt_is_tokens && r.prompt_tokens.empty()) bad_field("prompt", "must not be empty");
  if (auto v = opt_bool(body, "echo")) r.echo = *v;
  r.structured = parse_structured_output(body, nullptr, nullptr, false, defaults.grammar);
  // Legacy completions: logprobs is an int (number of alternatives).
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    if (body["logprobs"].is_boolean()) {
      r.logprobs = body["logprobs"].get<bool>();
    } else {
      auto v = opt_int(body, "logprobs", 0, 20);
      r.logprobs = true;
      r.top_logprobs = int(*v);
    }
  }
  return r;
}

}  // namespace nextn::server
