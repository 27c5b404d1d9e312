// server/request.h — OpenAI request bodies turned into one checked ParsedRequest.
// Covers /v1/chat/completions and /v1/completions: messages (string or content
// parts: text, and image_url parts decoded here from data: URLs — or fetched http(s)
// URLs when the server allows it (image_fetch.h) — with vision/),
// sampling fields, stop, seed, n, stream options, logprobs, tools,
// chat_template_kwargs, structured output (response_format, json_schema, grammar:
// structured_output.h) and nextn's extensions (speculative, num_draft_tokens,
// kv_bits, kv_group_size, nextn.token_sources). Unknown fields are ignored; invalid ones are 400s
// naming the field.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/image_fetch.h"
#include "server/structured_output.h"
#include "vision/image.h"

namespace nextn::server {

// Bounds on the images of one request (each image is also held to `image`).
struct ImageRequestLimits {
  vision::ImageLimits image;
  int max_images = 16;
  // All images together, decoded: 64 Mi pixels (192 MiB of RGB).
  int64_t max_total_pixels = int64_t(1) << 26;
  RemoteImageOptions remote;  // http(s) image URLs: fetched only when enabled
};

// One image_url content part, decoded when the request is parsed (so a bad image is a
// 400 before any work is queued), with where it stood in the conversation.
struct ImageInput {
  size_t message = 0;  // index in "messages"
  size_t part = 0;     // index in that message's "content" array
  vision::DecodedImage image;
};

// Server-wide defaults a request starts from (serve flags).
struct RequestDefaults {
  SamplingParams sampling;
  int max_tokens = 2048;
  KvOptions kv;  // the server's storage options (per-request kv_bits overrides type/group)
  grammar::GrammarLimits grammar;  // bounds on structured output (--grammar-max-* flags)
  ImageRequestLimits images;
};

struct ParsedRequest {
  bool chat = true;
  std::string model;
  // chat: messages with content normalized to strings (text parts joined), except a
  // message with image parts: its content is the list of {"type": "text", "text"} and
  // {"type": "image"} items in order, for the template (the images are in `images`).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::vector<ImageInput> images;  // every image_url part of every message, in order
  nlohmann::ordered_json tools;          // null when absent or tool_choice == "none"
  nlohmann::ordered_json tool_choice;    // as given (null when absent)
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // completions: text prompt or token ids.
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  bool echo = false;

  std::optional<int> max_tokens;  // nullopt: server default
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool speculative = true;
  int num_draft_tokens = -1;
  std::optional<KvOptions> kv;   // kv_bits given: the request's own KV storage
  bool kv_group_size_given = false;  // kv_group_size was in the body (must then fit the model)
  bool token_sources = false;    // "nextn": {"token_sources": true}: streamed chunks say how each token came
  StructuredOutput structured;   // response_format / json_schema / grammar / required tool call
};

ParsedRequest parse_chat_request(const nlohmann::ordered_json& body, const RequestDefaults& defaults);
ParsedRequest parse_completion_request(const nlohmann::ordered_json& body, const RequestDefaults& defaults);

}  // namespace nextn::server
