// bench/configs.cc — named benchmark configurations (mtp_bench's four and ours).
#include <sstream>

#include "bench/bench.h"
#include "util/error.h"

namespace nextn::bench {
namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

BenchConfig named_config(const std::string& key, int n_mtp) {
  std::string n = std::to_string(n_mtp);
  if (key == "vanilla") return {"Vanilla", key, {}};
  if (key == "mtp") return {"Vanilla + MTP", key, {"--mtp", "--num-mtp-tokens", n}};
  if (key == "turbo") return {"Vanilla + TurboQuant", key, {"--turbo-kv"}};
  if (key == "mtp+turbo") return {"Vanilla + MTP + TurboQuant", key, {"--mtp", "--num-mtp-tokens", n, "--turbo-kv"}};
  if (key == "auto") return {"MTP (adaptive depth)", key, {"--mtp", "--num-mtp-tokens", "auto"}};
  if (key == "ngram") return {"N-gram lookup", key, {"--spec-type", "ngram"}};
  if (key == "suffix") return {"Suffix decoding", key, {"--spec-type", "suffix", "--num-draft-tokens", "auto"}};
  if (key == "mtp+suffix")
    return {"MTP + suffix decoding", key, {"--mtp", "--num-mtp-tokens", "auto", "--spec-type", "suffix"}};
  if (key == "draft") return {"Draft model", key, {}};  // needs draft=--draft-model DIR
  fail(ErrorKind::kBadInput,
       "--configs: unknown configuration '{}' (known: vanilla, mtp, turbo, mtp+turbo, auto, ngram, suffix, mtp+suffix, "
       "draft=--draft-model DIR, or name=flags...)",
       key);
}

}  // namespace

std::vector<BenchConfig> parse_configs(const std::string& spec, int num_mtp_tokens) {
  std::vector<BenchConfig> configs;
  // Entries are separated by ',' unless inside a custom "name=flags" entry, which
  // runs to the next ';' or the end (flags may contain commas).
  size_t i = 0;
  while (i < spec.size()) {
    size_t eq = spec.find('=', i), comma = spec.find(',', i);
    if (eq != std::string::npos && (comma == std::string::npos || eq < comma)) {
      size_t end = spec.find(';', eq);
      if (end == std::string::npos) end = spec.size();
      std::string name = spec.substr(i, eq - i);
      BenchConfig c{name, name, split_words(spec.substr(eq + 1, end - eq - 1))};
      if (name == "draft") c.name = "Draft model";
      configs.push_back(c);
      i = end + 1;
    } else {
      size_t end = comma == std::string::npos ? spec.size() : comma;
      std::string key = spec.substr(i, end - i);
      if (!key.empty()) {
        if (key == "draft") fail(ErrorKind::kBadInput, "--configs: 'draft' needs its model: draft=--draft-model DIR");
        configs.push_back(named_config(key, num_mtp_tokens));
      }
      i = end + 1;
    }
  }
  if (configs.empty()) fail(ErrorKind::kBadInput, "--configs: no configuration given");
  return configs;
}

}  // namespace nextn::bench
