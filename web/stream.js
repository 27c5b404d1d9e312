// web/stream.js — reading a streamed chat completion: Server-Sent Events out of the
// response body, and the per-token provenance nextn adds when asked
// ("nextn": {"token_sources": true} → choices[0].nextn.tokens, see docs/server.md).

// Splits SSE text (fed in arbitrary pieces) into the data of each event; comments
// (": keep-alive") and other fields are skipped. onData gets the joined data lines.
export class SseParser {
  constructor(onData) {
    this.onData = onData;
    this.buffer = "";
  }
  push(chunk) {
    this.buffer += chunk;
    for (;;) {
      const m = /\r?\n\r?\n/.exec(this.buffer);
      if (!m) return;
      const block = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5));
      }
      if (data.length) this.onData(data.join("\n"));
    }
  }
}

// The tint class of one token entry.
export function sourceClass(entry) {
  switch (entry.source) {
    case "draft": return "src-d" + Math.min(entry.position, 4);
    case "correction": return "src-fix";
    case "bonus": return "src-bonus";
    case "target": return "src-target";
    default: return "";
  }
}

// Per-answer provenance: which class each character of content and reasoning has,
// kept as runs [[class, length], ...] (lengths in UTF-16 units, as JS strings count),
// and the answer's own acceptance figures rebuilt step by step.
export class Provenance {
  constructor() {
    this.content = [];    // runs over the message content
    this.reasoning = [];  // runs over the reasoning text
    this.tokens = 0;
    this.counts = { target: 0, draft: 0, correction: 0, bonus: 0 };
    this.steps = 0;          // steps that carried drafts
    this.draftTokens = 0;
    this.accepted = 0;
    this.draftedPerPos = [];
    this.acceptedPerPos = [];
    this.stepsPerDepth = [];  // steps per drafts carried (0: a plain decode row)
  }

  static append(runs, cls, length) {
    if (length <= 0) return;
    const last = runs[runs.length - 1];
    if (last && last[0] === cls) last[1] += length;
    else runs.push([cls, length]);
  }

  // One entry of choices[0].nextn.tokens.
  add(entry) {
    const cls = sourceClass(entry);
    if (entry.content) Provenance.append(this.content, cls, entry.content.length);
    if (entry.reasoning) Provenance.append(this.reasoning, cls, entry.reasoning.length);
    if (!entry.source) return;  // text released at the end: no token
    this.tokens++;
    if (entry.source in this.counts) this.counts[entry.source]++;
    // Every decode step ends with the target's own token, which tells the step's depth
    // (the answer's first token comes from the prompt pass: no step).
    if (entry.source !== "draft" && this.tokens > 1) {
      const depth = entry.drafts || 0;
      for (let k = this.stepsPerDepth.length; k <= depth; k++) this.stepsPerDepth[k] = 0;
      this.stepsPerDepth[depth]++;
    }
    // A step ends with the target's token; it tells how many drafts were made and
    // accepted (position - 1).
    if ((entry.source === "correction" || entry.source === "bonus") && entry.drafts > 0) {
      const accepted = entry.position - 1;
      this.steps++;
      this.draftTokens += entry.drafts;
      this.accepted += accepted;
      for (let k = 0; k < entry.drafts; k++) {
        this.draftedPerPos[k] = (this.draftedPerPos[k] || 0) + 1;
        this.acceptedPerPos[k] = (this.acceptedPerPos[k] || 0) + (k < accepted ? 1 : 0);
      }
    }
  }

  // Text that arrived without provenance (e.g. a stream without the field) keeps the
  // runs aligned with the text.
  addUntracked(channel, length) {
    Provenance.append(channel === "reasoning" ? this.reasoning : this.content, "", length);
  }

  summary() {
    return {
      tokens: this.tokens,
      counts: { ...this.counts },
      acceptanceRate: this.draftTokens ? this.accepted / this.draftTokens : null,
      meanAcceptedLength: this.steps ? 1 + this.accepted / this.steps : null,
      acceptancePerPos: this.draftedPerPos.map((d, k) => (d ? this.acceptedPerPos[k] / d : 0)),
      acceptedPerPos: [...this.acceptedPerPos],
      draftedPerPos: [...this.draftedPerPos],
      stepsPerDepth: [...this.stepsPerDepth],
    };
  }
}

// Splits text [at, at + s.length) into pieces of one class each: [[class, text], ...].
export function splitByRuns(runs, s, at) {
  const pieces = [];
  let runStart = 0, r = 0;
  while (r < runs.length && runStart + runs[r][1] <= at) runStart += runs[r++][1];
  let i = 0;
  while (i < s.length) {
    const cls = r < runs.length ? runs[r][0] : "";
    const runEnd = r < runs.length ? runStart + runs[r][1] : Infinity;
    const take = Math.min(s.length - i, runEnd - (at + i));
    const piece = s.slice(i, i + take);
    const last = pieces[pieces.length - 1];
    if (last && last[0] === cls) last[1] += piece;
    else pieces.push([cls, piece]);
    i += take;
    if (r < runs.length) runStart += runs[r++][1];
  }
  return pieces;
}
