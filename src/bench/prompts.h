// bench/prompts.h — benchmark prompts sized to a context length: prose and code
// from text the project ships (assembled from Debian packages by
// scripts/assemble_bench_prompts.sh), mtp_bench's repeated "apple ", a multi-turn
// chat, a JSON request answered freely (json) or under a JSON Schema (json-schema: the
// same messages with response_format, so acceptance with and without the constraint
// compare directly), answers that repeat what the model has read (edit: rewrite a
// 200-line file with a few edits; quote: quote a passage; agent: a tool loop re-sending a
// changed file; their size is their own, not the context length), a question about a
// generated picture (image-N for N×N, image-WxH: time to first token is the encoder's
// and the prompt's), or a user file.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace nextn::bench {

// Returns the token count of a text, if the server can tell.
using TokenCounter = std::function<std::optional<int>(const std::string&)>;

// Chat messages for prompt `kind` (apple|prose|code|chat|json|json-schema|edit|quote|agent|image-N|image-WxH|path
// to a file) holding
// about `context_tokens` tokens. Throws nextn::Error if the kind's text is missing.
// `variant` picks the picture of an image kind, so that requests numbered apart send
// different pictures (none is served from the server's picture cache).
nlohmann::json make_prompt_messages(const std::string& kind, int context_tokens, const TokenCounter& count,
                                    uint32_t variant = 0);

// Request fields the kind adds to the chat body (json-schema: response_format), or {}.
nlohmann::json prompt_request_fields(const std::string& kind);

// The picture size of an image kind ("image-448" → 448×448, "image-1024x768" → 1024×768);
// nullopt for other kinds; kBadInput for a malformed size.
std::optional<std::pair<int, int>> image_kind_size(const std::string& kind);

// Where the shipped prompt texts live (NEXTN_DATA_DIR env, else the source tree).
std::string prompt_data_dir();

}  // namespace nextn::bench
