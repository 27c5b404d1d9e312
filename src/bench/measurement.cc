// bench/measurement.cc — see measurement.h.
#include "bench/measurement.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace nextn::bench {
namespace {

double json_number(const nlohmann::json& j, const char* key, double fallback = 0) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void fill_from_stream(Measurement& m, const StreamResult& r) {
  m.ttft_s = r.ttft_s;
  m.total_s = r.total_s;
  m.prompt_tokens = r.prompt_tokens;
  m.completion_tokens = r.completion_tokens;
  m.content_chunks = r.content_chunks;
  // Tokens after the first one, over the time after the first one. Without
  // usage (a server that ignores include_usage) fall back to content chunks.
  int tokens = m.completion_tokens > 0 ? m.completion_tokens : m.content_chunks;
  m.aggregate_tps = m.total_s > 0 ? m.completion_tokens / m.total_s : 0;
  const auto& t = r.timings;
  if (t.is_object()) {
    m.cache_tokens = static_cast<int>(json_number(t, "cache_n"));
    m.prefill_tps = json_number(t, "prompt_per_second");
    m.server_predicted_per_second = json_number(t, "predicted_per_second");
    m.draft_n = static_cast<int>(json_number(t, "draft_n"));
    m.draft_accepted = static_cast<int>(json_number(t, "draft_n_accepted"));
    m.draft_steps = static_cast<int>(json_number(t, "draft_steps"));
    m.kv_bytes = json_number(t, "kv_bytes", json_number(t, "kv_bytes_used"));
    m.synthetic_accept = json_number(t, "synthetic_accept", -1);
    if (t.contains("kv_type") && t["kv_type"].is_string()) m.kv_type = t["kv_type"];
    m.image_ms = json_number(t, "image_ms");
    // The first token exists at the server's prompt_ms (admission to first token: the
    // pictures' encoding and the prefill) even where its text comes later: random weights
    // whose first tokens decode to nothing, or tokens held back for one UTF-8 character.
    // When the first text came more than one token's time after that, the server's figure
    // is the first token's time; otherwise runs of the same model would differ in TTFT
    // (and TPS, timed after it) by when text happened to appear — on random weights, a
    // plain run often shows none at all while a speculative one shows some late. Text on
    // time keeps the client's own figure (network and queue included).
    const double prompt_s = json_number(t, "prompt_ms") / 1e3;
    const double per_token_s =
        m.completion_tokens > 0 ? (m.total_s - prompt_s) / m.completion_tokens : 0;
    if (prompt_s > 0 && (m.content_chunks == 0 || m.ttft_s - prompt_s > per_token_s)) {
      m.ttft_s = prompt_s;
      m.ttft_from_server = true;
    }
    // nextn: draft_drafted_per_pos / draft_accepted_per_pos (counts per draft position).
    if (t.contains("draft_drafted_per_pos") && t.contains("draft_accepted_per_pos") &&
        t["draft_drafted_per_pos"].is_array() && t["draft_accepted_per_pos"].is_array()) {
      const auto& d = t["draft_drafted_per_pos"];
      const auto& a = t["draft_accepted_per_pos"];
      for (size_t k = 0; k < std::min(d.size(), a.size()); ++k) {
        double drafted = d[k].is_number() ? d[k].get<double>() : 0;
        m.accept_per_pos.push_back(drafted > 0 && a[k].is_number() ? a[k].get<double>() / drafted : 0);
      }
    }
  }
  const double gen_time = m.total_s - m.ttft_s;
  m.tps = tokens > 1 && gen_time > 0 ? (tokens - 1) / gen_time : 0;
  // Text that arrives in one burst (a detokenizer holding back incomplete UTF-8,
  // a server that buffers) leaves no time after the first chunk to divide by: use
  // the server's own decode rate then, and say so.
  if (m.content_chunks < 2 && m.server_predicted_per_second > 0) {
    m.tps = m.server_predicted_per_second;
    m.tps_from_server = true;
  }
  if (m.prefill_tps == 0 && m.ttft_s > 0) m.prefill_tps = (m.prompt_tokens - m.cache_tokens) / m.ttft_s;
}

Measurement merge_clients(const std::vector<Measurement>& parts, double wall_s) {
  Measurement m = parts.at(0);
  m.clients = int(parts.size());
  double tps = 0, ttft = 0, prefill = 0, server_tps = 0;
  int tokens = 0, drafted = 0, accepted = 0, steps = 0;
  std::vector<double> per_pos;
  for (const Measurement& p : parts) {
    tps += p.tps;
    ttft += p.ttft_s;
    prefill += p.prefill_tps;
    server_tps += p.server_predicted_per_second;
    tokens += p.completion_tokens;
    drafted += p.draft_n;
    accepted += p.draft_accepted;
    steps += p.draft_steps;
    per_pos.resize(std::max(per_pos.size(), p.accept_per_pos.size()), 0.0);
    for (size_t k = 0; k < p.accept_per_pos.size(); ++k) per_pos[k] += p.accept_per_pos[k] / double(parts.size());
  }
  const double n = double(parts.size());
  m.tps = tps / n;
  m.ttft_s = ttft / n;
  m.prefill_tps = prefill / n;
  m.server_predicted_per_second = server_tps / n;
  m.total_s = wall_s;
  m.completion_tokens = tokens;
  m.aggregate_tps = wall_s > 0 ? tokens / wall_s : 0;
  m.draft_n = drafted;
  m.draft_accepted = accepted;
  m.draft_steps = steps;
  m.accept_per_pos = per_pos;
  return m;
}

nlohmann::json Measurement::to_json() const {
  return {{"config", config_key},
          {"config_name", config_name},
          {"prompt", prompt},
          {"context", context},
          {"run", run},
          {"status", status},
          {"error", error},
          {"ttft_s", ttft_s},
          {"total_s", total_s},
          {"tps", tps},
          {"clients", clients},
          {"aggregate_tps", aggregate_tps},
          {"tps_from_server_timings", tps_from_server},
          {"ttft_from_server_timings", ttft_from_server},
          {"image_ms", image_ms},
          {"prefill_tps", prefill_tps},
          {"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"content_chunks", content_chunks},
          {"cache_tokens", cache_tokens},
          {"rss_mb", rss_mb},
          {"peak_rss_mb", peak_rss_mb},
          {"kv_bytes", kv_bytes},
          {"kv_type", kv_type},
          {"draft_n", draft_n},
          {"draft_n_accepted", draft_accepted},
          {"draft_steps", draft_steps},
          {"accept_rate", accept_rate()},
          {"mean_accepted_length", mean_accepted_length()},
          {"accept_per_pos", accept_per_pos},
          {"server_predicted_per_second", server_predicted_per_second},
          {"synthetic_accept", synthetic_accept}};
}

nlohmann::json Summary::to_json() const {
  return {{"config", config_key},   {"config_name", config_name}, {"prompt", prompt},
          {"context", context},     {"status", status},           {"runs", runs},
          {"tps_median", tps_median}, {"tps_min", tps_min},       {"tps_max", tps_max},
          {"clients", clients},     {"aggregate_tps_median", aggregate_tps_median},
          {"aggregate_tps_min", aggregate_tps_min}, {"aggregate_tps_max", aggregate_tps_max},
          {"ttft_median_s", ttft_median}, {"prefill_tps_median", prefill_tps_median},
          {"rss_mb", rss_mb},       {"peak_rss_mb", peak_rss_mb}, {"kv_bytes", kv_bytes},
          {"accept_rate", accept_rate}, {"mean_accepted_length", mean_len},
          {"accept_per_pos", accept_per_pos}};
}

std::vector<Summary> summarize(const std::vector<Measurement>& measurements) {
  // Keep first-seen order of (config, prompt, context).
  std::vector<std::tuple<std::string, std::string, int>> order;
  std::map<std::tuple<std::string, std::string, int>, std::vector<const Measurement*>> groups;
  for (const auto& m : measurements) {
    auto key = std::make_tuple(m.config_key, m.prompt, m.context);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&m);
  }
  std::vector<Summary> out;
  for (const auto& key : order) {
    const auto& runs = groups[key];
    Summary s;
    s.config_key = runs[0]->config_key;
    s.config_name = runs[0]->config_name;
    s.prompt = runs[0]->prompt;
    s.context = runs[0]->context;
    s.status = "ok";
    std::vector<double> tps, ttft, prefill, aggregate;
    int draft_n = 0, accepted = 0, steps = 0;
    std::vector<double> per_pos_sum;
    int per_pos_runs = 0;
    for (const auto* m : runs) {
      if (m->status != "ok") {
        if (s.status == "ok") s.status = m->status;
        continue;
      }
      ++s.runs;
      tps.push_back(m->tps);
      aggregate.push_back(m->aggregate_tps);
      s.clients = m->clients;
      ttft.push_back(m->ttft_s);
      prefill.push_back(m->prefill_tps);
      s.rss_mb = std::max(s.rss_mb, m->rss_mb);
      s.peak_rss_mb = std::max(s.peak_rss_mb, m->peak_rss_mb);
      s.kv_bytes = std::max(s.kv_bytes, m->kv_bytes);
      draft_n += m->draft_n;
      accepted += m->draft_accepted;
      steps += m->draft_steps;
      if (!m->accept_per_pos.empty()) {
        per_pos_sum.resize(std::max(per_pos_sum.size(), m->accept_per_pos.size()), 0.0);
        for (size_t k = 0; k < m->accept_per_pos.size(); ++k) per_pos_sum[k] += m->accept_per_pos[k];
        ++per_pos_runs;
      }
    }
    if (s.runs > 0) s.status = "ok";  // some runs succeeded: report them
    if (!tps.empty()) {
      s.tps_median = median(tps);
      s.tps_min = *std::min_element(tps.begin(), tps.end());
      s.tps_max = *std::max_element(tps.begin(), tps.end());
      s.aggregate_tps_median = median(aggregate);
      s.aggregate_tps_min = *std::min_element(aggregate.begin(), aggregate.end());
      s.aggregate_tps_max = *std::max_element(aggregate.begin(), aggregate.end());
      s.ttft_median = median(ttft);
      s.prefill_tps_median = median(prefill);
    }
    if (draft_n > 0) s.accept_rate = static_cast<double>(accepted) / draft_n;
    if (steps > 0) s.mean_len = 1.0 + static_cast<double>(accepted) / steps;
    for (double v : per_pos_sum) s.accept_per_pos.push_back(per_pos_runs ? v / per_pos_runs : 0);
    out.push_back(s);
  }
  return out;
}

}  // namespace nextn::bench
