// bench/report.cc — see report.h.
#include "bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace nextn::bench {
namespace {

std::string rule(int n, const char* glyph) {
  std::string s;
  for (int i = 0; i < n; ++i) s += glyph;
  return s;
}

std::vector<std::string> prompt_kinds(const Report& r) {
  std::vector<std::string> kinds;
  for (const auto& s : r.summaries)
    if (std::find(kinds.begin(), kinds.end(), s.prompt) == kinds.end()) kinds.push_back(s.prompt);
  return kinds;
}

std::string percent_or_na(double v) { return v < 0 ? "N/A" : fmt::format("{:.1f}%", 100 * v); }
std::string len_or_na(double v) { return v < 0 ? "N/A" : fmt::format("{:.2f}", v); }
std::string gb(double mb) { return fmt::format("{:.2f} GB", mb / 1024.0); }

std::string per_pos(const std::vector<double>& v) {
  if (v.empty()) return "—";
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) s += (k ? " / " : "") + fmt::format("{:.2f}", v[k]);
  return s;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string format_console_table(const Report& r) {
  std::string out;
  for (const auto& kind : prompt_kinds(r)) {
    out += rule(80, "─") + "\n";
    out += "  🏆 nextn Speculative Decoding Summary — prompt: " + kind + "\n";
    out += "  Model: " + r.model + "\n";
    out += rule(80, "─") + "\n";
    out += fmt::format("  {:<10} | {:<32} | {:>7} | {:>6} | {:>8} | {:>9} | {:>7} | {:>8}\n", "Context", "Configuration",
                       "TPS", "TTFT", "OS RAM", "Peak RSS", "Accept", "Mean-len");
    out += "  " + rule(78, "-") + "\n";
    for (const auto& s : r.summaries) {
      if (s.prompt != kind) continue;
      if (s.status != "ok") {
        out += fmt::format("  {:<10} | {:<32} | {:>10} | {:>6} | {:>8} | {:>9} | {:>7} | {:>8}\n", s.context,
                           s.config_name, s.status, s.status, "N/A", "N/A", "N/A", "N/A");
        continue;
      }
      out += fmt::format("  {:<10} | {:<32} | {:>10} | {:>6} | {:>8} | {:>9} | {:>7} | {:>8}\n", s.context,
                         s.config_name, fmt::format("{:.1f} tok/s", s.tps_median), fmt::format("{:.2f}s", s.ttft_median),
                         gb(s.rss_mb), gb(s.peak_rss_mb), percent_or_na(s.accept_rate), len_or_na(s.mean_len));
      if (s.clients > 1)
        out += fmt::format("  {:<10} | {:<32} | {:>10} |  (all {} clients together; TPS above is per client)\n", "",
                           "", fmt::format("{:.1f} tok/s", s.aggregate_tps_median), s.clients);
    }
    out += rule(80, "─") + "\n";
  }
  return out;
}

std::string format_markdown(const Report& r) {
  const auto& m = r.machine;
  std::string out = fmt::format("### `{}` — speculative decoding benchmark\n\n", r.model);
  out += fmt::format("- Machine: {} ({} logical CPUs, {} physical cores, {:.1f} GB RAM), host `{}`\n", m.cpu_model,
                     m.logical_cpus, m.physical_cores, m.memory_gb, m.hostname);
  out += fmt::format("- Measured memory read bandwidth: {:.1f} GB/s; kernels: {}\n", m.read_bandwidth_gbs, m.simd_target);
  out += fmt::format("- nextn {} — {}\n", NEXTN_VERSION, m.date_utc);
  out += "- Command: `" + r.command + "`\n\n";
  for (const auto& kind : prompt_kinds(r)) {
    out += "#### Prompt: " + kind + "\n\n";
    out += "| Configuration | Context | Clients | TPS (median) | TPS min–max | Aggregate tok/s (median, min–max) | TTFT | "
           "Prefill tok/s | RSS | Peak RSS | KV bytes | Accept | Mean len | Accept per position |\n";
    out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& s : r.summaries) {
      if (s.prompt != kind) continue;
      if (s.status != "ok") {
        out += fmt::format("| {} | {} | {} | {} | | | | | | | | | | |\n", s.config_name, s.context, s.clients, s.status);
        continue;
      }
      out += fmt::format("| {} | {} | {} | {:.1f} tok/s | {:.1f}–{:.1f} | {:.1f} ({:.1f}–{:.1f}) | {:.2f}s | {:.0f} | {} | "
                         "{} | {} | {} | {} | {} |\n",
                         s.config_name, s.context, s.clients, s.tps_median, s.tps_min, s.tps_max,
                         s.aggregate_tps_median, s.aggregate_tps_min, s.aggregate_tps_max, s.ttft_median,
                         s.prefill_tps_median, gb(s.rss_mb), gb(s.peak_rss_mb),
                         s.kv_bytes > 0 ? fmt::format("{:.1f} MB", s.kv_bytes / 1e6) : "N/A",
                         percent_or_na(s.accept_rate), len_or_na(s.mean_len), per_pos(s.accept_per_pos));
    }
    out += "\n";
  }
  out += "> **TPS**: generated tokens after the first (from `usage.completion_tokens`) over the time after the first "
         "content chunk, per client (several clients: their mean). **Aggregate tok/s**: every client's generated tokens "
         "over the time from the first request sent to the last one finished. **TTFT**: request sent → first content chunk, or the server's own time to the first token (`prompt_ms`) where the first text came more than a token's time after it. **RSS / Peak RSS**: server process, sampled "
         "every 0.5 s from /proc (VmRSS, VmHWM). **Accept**: accepted / drafted tokens; **Mean len**: 1 + accepted "
         "per speculative step (tokens per target forward).\n";
  return out;
}

std::string format_json(const Report& r, const BenchOptions& o) {
  nlohmann::json j;
  j["model"] = r.model;
  j["command"] = r.command;
  j["machine"] = r.machine.to_json();
  j["options"] = {{"contexts", o.contexts}, {"max_tokens", o.max_tokens}, {"temperature", o.temperature},
                  {"repeat", o.repeat},     {"prompts", o.prompts},       {"url", o.url}};
  j["configs"] = nlohmann::json::array();
  for (const auto& c : o.configs) j["configs"].push_back({{"key", c.key}, {"name", c.name}, {"flags", c.flags}});
  j["measurements"] = nlohmann::json::array();
  for (const auto& m : r.measurements) j["measurements"].push_back(m.to_json());
  j["warmups"] = r.warmups;
  j["summary"] = nlohmann::json::array();
  for (const auto& s : r.summaries) j["summary"].push_back(s.to_json());
  return j.dump(2) + "\n";
}

std::string format_svg(const Report& r) {
  // One grouped bar chart per prompt kind: groups = contexts, bars = configurations.
  static const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"};
  auto kinds = prompt_kinds(r);
  std::vector<std::string> configs;
  std::vector<int> contexts;
  double max_tps = 1;
  for (const auto& s : r.summaries) {
    if (std::find(configs.begin(), configs.end(), s.config_name) == configs.end()) configs.push_back(s.config_name);
    if (std::find(contexts.begin(), contexts.end(), s.context) == contexts.end()) contexts.push_back(s.context);
    max_tps = std::max(max_tps, s.tps_max);
  }
  const int chart_w = 760, chart_h = 260, left = 60, top = 40, panel_h = chart_h + 70;
  int legend_h = 24 * static_cast<int>(configs.size()) + 10;
  int height = top + panel_h * static_cast<int>(kinds.size()) + legend_h;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      chart_w + left + 40, height);
  out += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"16\" font-weight=\"bold\">{} — generation tok/s</text>\n",
                     left, escape_xml(r.model));
  for (size_t p = 0; p < kinds.size(); ++p) {
    int y0 = top + static_cast<int>(p) * panel_h;
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">prompt: {}</text>\n", left, y0 + 14,
                       escape_xml(kinds[p]));
    int base = y0 + 24 + chart_h;
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, base,
                       left + chart_w, base);
    for (int t = 0; t <= 4; ++t) {
      double v = max_tps * t / 4;
      int y = base - static_cast<int>(chart_h * t / 4.0);
      out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n", left, y, left + chart_w, y);
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.0f}</text>\n", left - 6, y + 4, v);
    }
    double group_w = static_cast<double>(chart_w) / std::max<size_t>(1, contexts.size());
    double bar_w = (group_w - 20) / std::max<size_t>(1, configs.size());
    for (size_t c = 0; c < contexts.size(); ++c) {
      double gx = left + c * group_w + 10;
      out += fmt::format("<text x=\"{:.0f}\" y=\"{}\" text-anchor=\"middle\">{} tokens</text>\n", gx + (group_w - 20) / 2,
                         base + 16, contexts[c]);
      for (size_t k = 0; k < configs.size(); ++k) {
        for (const auto& s : r.summaries) {
          if (s.prompt != kinds[p] || s.context != contexts[c] || s.config_name != configs[k]) continue;
          double x = gx + k * bar_w;
          if (s.status != "ok") {
            out += fmt::format("<text x=\"{:.0f}\" y=\"{}\" text-anchor=\"middle\" fill=\"red\">{}</text>\n",
                               x + bar_w / 2, base - 4, s.status);
            continue;
          }
          double h = chart_h * s.tps_median / max_tps;
          out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} "
                             "@ {}: {:.1f} tok/s</title></rect>\n",
                             x + 1, base - h, bar_w - 2, h, colors[k % 8], escape_xml(configs[k]), contexts[c],
                             s.tps_median);
          out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\">{:.1f}</text>\n",
                             x + bar_w / 2, base - h - 3, s.tps_median);
        }
      }
    }
  }
  int ly = top + panel_h * static_cast<int>(kinds.size());
  for (size_t k = 0; k < configs.size(); ++k) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>\n", left, ly + 24 * k,
                       colors[k % 8]);
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + 20, ly + 24 * k + 12, escape_xml(configs[k]));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace nextn::bench
