// cli/tokenize.cc — `nextn tokenize --model DIR [--ids] [--no-special] TEXT`: prints the
// token ids (one line, space-separated) with --ids, else one "id<TAB>token-text" line per
// token (token text JSON-escaped). `--decode 1,2,3` prints the decoded text instead.
// For tools and differential tests: `--batch FILE.jsonl` reads lines {"text": s} or
// {"hex": raw-bytes-in-hex} and writes one line per input: {"ids": [...], "decode": s,
// "stream": s} (decode = one-shot decode of ids, stream = concatenated StreamDecoder
// output; both without skipping special tokens); `--bench` with --batch prints only
// {"load_s", "bytes", "encode_s", "mb_per_s"} for encoding every line once.
#include <cstdio>
#include <chrono>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nextn {

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

int run_batch(const Tokenizer& tok, const std::string& path, bool bench, double load_s, bool add_special) {
  std::ifstream in(path);
  if (!in) fail(ErrorKind::kNotFound, "{}: cannot open file", path);
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    texts.push_back(j.contains("hex") ? from_hex(j["hex"].get<std::string>()) : j.at("text").get<std::string>());
  }
  if (bench) {
    size_t bytes = 0, n_ids = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (auto& t : texts) {
      bytes += t.size();
      n_ids += tok.encode(t, false).size();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"load_s\": %.4f, \"bytes\": %zu, \"tokens\": %zu, \"encode_s\": %.4f, \"mb_per_s\": %.3f}\n", load_s,
                bytes, n_ids, s, bytes / 1e6 / s);
    return 0;
  }
  for (auto& t : texts) {
    auto ids = tok.encode(t, add_special);
    std::string stream;
    StreamDecoder dec(tok, false);
    for (int32_t id : ids) stream += dec.push(id);
    stream += dec.flush();
    nlohmann::json out = {{"ids", ids}, {"decode", tok.decode(ids, false)}, {"stream", stream}};
    std::string s = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& root) {
  struct Options {
    std::string model = NEXTN_DEFAULT_MODEL;
    bool ids_only = false;
    bool no_special = false;
    std::string decode;
    std::string batch;
    bool bench = false;
    std::string text;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* app = root.add_subcommand("tokenize", "Tokenize text with a model's tokenizer.json");
  app->add_option("--model", opts->model, "Model directory with tokenizer.json");
  app->add_flag("--ids", opts->ids_only, "Print only the ids, space-separated");
  app->add_flag("--no-special", opts->no_special, "Do not add BOS/EOS (add_special_tokens=false)");
  app->add_option("--decode", opts->decode, "Comma-separated ids to decode instead of encoding");
  app->add_option("--batch", opts->batch, "JSONL file of {\"text\"} or {\"hex\"} lines (see source)");
  app->add_flag("--bench", opts->bench, "With --batch: time encoding only");
  app->add_option("text", opts->text, "Text to tokenize");
  return {app, [opts]() -> int {
            auto t0 = std::chrono::steady_clock::now();
            auto tok = Tokenizer::load(opts->model);
            double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!opts->batch.empty()) return run_batch(*tok, opts->batch, opts->bench, load_s, !opts->no_special);
            if (!opts->decode.empty()) {
              std::vector<int32_t> ids;
              std::stringstream ss(opts->decode);
              std::string item;
              while (std::getline(ss, item, ','))
                if (!item.empty()) ids.push_back(static_cast<int32_t>(std::stol(item)));
              std::string text = tok->decode(ids, false);
              std::fwrite(text.data(), 1, text.size(), stdout);
              std::fputc('\n', stdout);
              return 0;
            }
            auto ids = tok->encode(opts->text, !opts->no_special);
            if (opts->ids_only) {
              for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
              std::printf("\n");
              return 0;
            }
            for (int32_t id : ids) {
              std::string text = nlohmann::json(tok->token_text(id)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
              std::printf("%d\t%s\n", id, text.c_str());
            }
            return 0;
          }};
}

}  // namespace nextn
