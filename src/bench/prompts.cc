// bench/prompts.cc — see prompts.h.
#include "bench/prompts.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/file.h"
#include "vision/data_url.h"
#include "vision/image.h"

namespace nextn::bench {
namespace {

// Cuts at a line boundary at or before n bytes, never inside a UTF-8 sequence.
std::string cut(const std::string& text, size_t n) {
  if (n >= text.size()) return text;
  size_t nl = text.rfind('\n', n);
  if (nl != std::string::npos && nl > n / 2) return text.substr(0, nl + 1);
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

// The longest prefix of `source` (repeated if too short) with about `target` tokens.
std::string sized_text(const std::string& source, int target, const TokenCounter& count) {
  std::string text = source;
  while (text.size() < static_cast<size_t>(target) * 6) text += "\n\n" + source;
  size_t n = static_cast<size_t>(target) * 4;  // first guess: 4 bytes per token
  for (int round = 0; round < 3; ++round) {
    auto tokens = count ? count(cut(text, n)) : std::nullopt;
    if (!tokens || *tokens <= 0) break;
    double ratio = static_cast<double>(target) / *tokens;
    if (ratio > 0.98 && ratio < 1.02) break;
    n = std::min(text.size(), static_cast<size_t>(n * ratio));
  }
  return cut(text, n);
}

// Lines [first, first + n) of `text`.
std::string lines_of(const std::string& text, int first, int n) {
  std::istringstream in(text);
  std::string line, out;
  for (int i = 0; std::getline(in, line) && i < first + n; ++i)
    if (i >= first) out += line + "\n";
  return out;
}

// The repetitive kinds, where the answer repeats text the model has seen: speculation
// that looks text up (suffix decoding, n-gram) is measured on them.
//   edit:  rewrite a 200-line source file with a few edits, in full;
//   quote: quote a passage word for word, then summarise it;
//   agent: an agent loop that has read a file through a tool and gets it back changed,
//          asked to show the changed function in full.
nlohmann::json repetitive_messages(const std::string& kind, int body, const TokenCounter& count) {
  using nlohmann::json;
  const std::string code = read_file(prompt_data_dir() + "/code.txt");
  // A file of n lines, cut short (at a line end) where the context is smaller.
  auto file = [&](int first, int n, int budget) {
    std::string text = lines_of(code, first, n);
    const std::optional<int> tokens = count ? count(text) : std::nullopt;
    return tokens && *tokens > budget ? sized_text(text, budget, count) : text;
  };
  if (kind == "edit") {
    return json::array({{{"role", "user"},
                         {"content", "Rewrite the following file with the macro SQLITE_API renamed to SQLITE_PUBLIC "
                                     "and every comment kept. Output the complete file and nothing else.\n\n" +
                                         file(40, 200, body)}}});
  }
  if (kind == "quote") {
    const std::string prose = read_file(prompt_data_dir() + "/prose.txt");
    return json::array({{{"role", "user"},
                         {"content", "Quote the passage below word for word as a Markdown block quote, then summarise "
                                     "it in one sentence.\n\n" + sized_text(prose, std::min(body, 600), count)}}});
  }
  // The file twice (before and after the tool's edit): each gets half the context.
  const std::string before = file(300, 120, body / 2 - 40), after = file(300, 60, body / 4) + file(362, 58, body / 4 - 40);
  return json::array({
      {{"role", "system"}, {"content", "You are a coding agent. Call read_file(path) to read files; show code in full."}},
      {{"role", "user"}, {"content", "Remove the duplicated declaration in sqlite3.h."}},
      {{"role", "assistant"}, {"content", "read_file(\"sqlite3.h\")"}},
      {{"role", "user"}, {"content", "Tool output:\n" + before}},
      {{"role", "assistant"}, {"content", "I removed two lines after line 60. read_file(\"sqlite3.h\")"}},
      {{"role", "user"}, {"content", "Tool output:\n" + after + "\nShow the changed part of the file in full."}},
  });
}

}  // namespace

std::optional<std::pair<int, int>> image_kind_size(const std::string& kind) {
  if (kind.rfind("image-", 0) != 0) return std::nullopt;
  int w = 0, h = 0;
  char tail = 0;
  const std::string size = kind.substr(6);
  const int n = std::sscanf(size.c_str(), "%dx%d%c", &w, &h, &tail);
  if (n == 1 && size.find('x') == std::string::npos) h = w;
  else if (n != 2) fail(ErrorKind::kBadInput, "prompt kind '{}': expected image-N or image-WxH", kind);
  if (w < 16 || h < 16 || w > 8192 || h > 8192)
    fail(ErrorKind::kBadInput, "prompt kind '{}': sides must be 16..8192 pixels", kind);
  return std::pair{w, h};
}

std::string prompt_data_dir() {
  const char* env = std::getenv("NEXTN_DATA_DIR");
  if (env && *env) return std::string(env) + "/bench";
  return std::string(NEXTN_DATA_DIR) + "/bench";
}

namespace {
// The json / json-schema kinds: a record with nested objects, enums, bounded numbers,
// a date and a list, like an agent's tool output.
const char* kJsonInstruction =
    "Describe a fictional employee as a JSON object with the fields name, age (18 to 70), email, "
    "start_date (YYYY-MM-DD), department (one of engineering, sales, support), skills (up to 5 short "
    "strings) and address (street, city, postal_code). Reply with the JSON object only.";
const char* kJsonSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":18,"maximum":70},
  "email":{"type":"string","format":"email"},"start_date":{"type":"string","format":"date"},
  "department":{"enum":["engineering","sales","support"]},
  "skills":{"type":"array","items":{"type":"string","maxLength":24},"maxItems":5},
  "address":{"type":"object","properties":{"street":{"type":"string","maxLength":40},
    "city":{"type":"string","maxLength":30},"postal_code":{"type":"string","pattern":"^[0-9]{5}$"}},
    "required":["street","city","postal_code"]}},
  "required":["name","age","email","start_date","department","skills","address"],"additionalProperties":false})";
}  // namespace

nlohmann::json prompt_request_fields(const std::string& kind) {
  if (kind != "json-schema") return nlohmann::json::object();
  return {{"response_format",
           {{"type", "json_schema"}, {"json_schema", {{"name", "employee"}, {"schema", nlohmann::json::parse(kJsonSchema)}}}}}};
}

nlohmann::json make_prompt_messages(const std::string& kind, int context_tokens, const TokenCounter& count,
                                    uint32_t variant) {
  using nlohmann::json;
  if (kind == "json" || kind == "json-schema") return json::array({{{"role", "user"}, {"content", kJsonInstruction}}});
  if (const auto size = image_kind_size(kind)) {
    // One question about a generated picture (vision/image.h test_picture), sent as
    // PNG in a data: URL, as chat clients send pictures; its size is the kind's.
    const std::string png = vision::encode_png_rgb(vision::test_picture(size->first, size->second, 7 + variant));
    return json::array({{{"role", "user"},
                         {"content", json::array({{{"type", "text"}, {"text", "Describe this picture in detail."}},
                                                  {{"type", "image_url"},
                                                   {"image_url", {{"url", vision::make_data_url("image/png", png)}}}}})}}});
  }
  const int overhead = 24;  // chat template and instruction tokens
  int body = std::max(8, context_tokens - overhead);
  if (kind == "edit" || kind == "quote" || kind == "agent") return repetitive_messages(kind, body, count);
  if (kind == "apple") {
    // Exactly mtp_bench's prompt, kept for comparison with published numbers.
    std::string text;
    for (int i = 0; i < static_cast<int>(context_tokens * 0.75); ++i) text += "apple ";
    return json::array({{{"role", "user"}, {"content", text}}});
  }
  if (kind == "prose" || kind == "code") {
    std::string source = read_file(prompt_data_dir() + "/" + kind + ".txt");
    std::string instruction = kind == "prose" ? "Continue the following text.\n\n" : "Continue the following source code.\n\n";
    return json::array({{{"role", "user"}, {"content", instruction + sized_text(source, body, count)}}});
  }
  if (kind == "chat") {
    std::string source = read_file(prompt_data_dir() + "/prose.txt");
    std::string text = sized_text(source, body, count);
    // Alternate user/assistant turns over paragraphs, ending with a user turn.
    json messages = json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}}});
    std::istringstream in(text);
    std::string para, line;
    int turn = 0;
    auto flush = [&] {
      if (para.empty()) return;
      messages.push_back({{"role", turn % 2 == 0 ? "user" : "assistant"}, {"content", para}});
      para.clear();
      ++turn;
    };
    while (std::getline(in, line)) {
      para += line + "\n";
      if (para.size() > 1500) flush();
    }
    flush();
    if (messages.back()["role"] != "user") messages.push_back({{"role", "user"}, {"content", "Please go on."}});
    return messages;
  }
  std::string source = read_file(kind);  // a user file
  return json::array({{{"role", "user"}, {"content", sized_text(source, body, count)}}});
}

}  // namespace nextn::bench
