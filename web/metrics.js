// web/metrics.js — the server's /metrics (Prometheus text format 0.0.4) read into
// numbers, and the speculative-decoding summary the page's panel shows.

// Parses exposition text into {name: [{labels: {k: v}, value}]}; comments (# HELP,
// # TYPE) and malformed lines are skipped.
export function parsePrometheus(textBody) {
  const out = {};
  for (const raw of textBody.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      const re = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/y;
      let lm;
      while ((lm = re.exec(m[3])) !== null)
        labels[lm[1]] = lm[2].replace(/\\(["\\n])/g, (_, c) => (c === "n" ? "\n" : c));
    }
    const v = m[4];
    const value = v === "+Inf" ? Infinity : v === "-Inf" ? -Infinity : v === "NaN" ? NaN : Number(v);
    if (Number.isNaN(value) && v !== "NaN") continue;
    (out[m[1]] ||= []).push({ labels, value });
  }
  return out;
}

// The value of an unlabelled sample, or `fallback`.
export function sample(metrics, name, fallback = 0) {
  const s = metrics[name];
  return s && s.length ? s[0].value : fallback;
}

// What the panel shows for the server as a whole.
export function serverSummary(metrics) {
  const drafts = sample(metrics, "nextn:spec_decode_num_drafts_total");
  const draftTokens = sample(metrics, "nextn:spec_decode_num_draft_tokens_total");
  const accepted = sample(metrics, "nextn:spec_decode_num_accepted_tokens_total");
  const perPos = [];
  for (const s of metrics["nextn:spec_decode_num_accepted_tokens_per_pos_total"] || []) {
    const k = parseInt(s.labels.position, 10);
    if (Number.isInteger(k) && k >= 0 && k < 64) perPos[k] = s.value;
  }
  for (let k = 0; k < perPos.length; k++) perPos[k] ||= 0;
  // The depth histogram's cumulative buckets, back to steps per depth.
  const cumulative = [];
  for (const s of metrics["nextn:spec_decode_draft_depth_bucket"] || []) {
    const k = parseInt(s.labels.le, 10);
    if (Number.isInteger(k) && k >= 0 && k < 64) cumulative[k] = s.value;
  }
  const stepsPerDepth = [];
  for (let k = 0, below = 0; k < cumulative.length; k++) {
    const upto = cumulative[k] ?? below;
    stepsPerDepth[k] = upto - below;
    below = upto;
  }
  return {
    requests: sample(metrics, "nextn:requests_total"),
    generatedTokens: sample(metrics, "nextn:generation_tokens_total"),
    tokensPerSecond: sample(metrics, "nextn:generation_tokens_per_second"),
    drafts,
    draftTokens,
    accepted,
    acceptanceRate: draftTokens > 0 ? accepted / draftTokens : null,
    meanAcceptedLength: drafts > 0 ? 1 + accepted / drafts : null,
    // vLLM's per-position rate: accepted at position k over the drafting steps.
    acceptancePerPos: drafts > 0 ? perPos.map((a) => a / drafts) : [],
    stepsPerDepth,
    kvBytes: sample(metrics, "nextn:kv_cache_bytes"),
    kvCompression: sample(metrics, "nextn:kv_cache_compression_ratio", 1),
    residentBytes: sample(metrics, "nextn:process_resident_memory_bytes"),
  };
}

// "0 ×12 · 2 ×30": decode steps per chosen depth, depths never chosen left out.
export function formatDepths(stepsPerDepth) {
  const parts = [];
  (stepsPerDepth || []).forEach((n, k) => { if (n > 0) parts.push(`${k} ×${n}`); });
  return parts.length ? parts.join(" · ") : "–";
}

export function formatBytes(n) {
  if (!Number.isFinite(n) || n <= 0) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return `${n >= 100 || u === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[u]}`;
}
