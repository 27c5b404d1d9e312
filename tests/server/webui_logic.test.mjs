// tests/server/webui_logic.test.mjs — the chat page's own logic, in node: the markdown
// renderer (escaping, safe links, and that every text node's offset points at its
// characters in the source, which the tinting relies on), the Prometheus parser, the
// SSE splitter under any chunking, and the provenance bookkeeping (runs, per-position
// acceptance rebuilt from token entries).
import test from "node:test";
import assert from "node:assert/strict";

import { parseMarkdown, parseInline, toHtml, textOf } from "../../web/markdown.js";
import { parsePrometheus, serverSummary, formatBytes, formatDepths } from "../../web/metrics.js";
import { SseParser, Provenance, splitByRuns, sourceClass } from "../../web/stream.js";

function textNodes(nodes, out = []) {
  for (const n of nodes) {
    if ("text" in n) out.push(n);
    else textNodes(n.children, out);
  }
  return out;
}

// A deterministic generator of markdown-ish text (headings, lists, fences, markup,
// escapes, HTML-looking text, multi-byte characters).
function* samples(count) {
  let seed = 12345;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const atoms = ["word", " ", "\n", "\n\n", "# ", "## ", "- ", "1. ", "  - ", "> ", "```", "```js\n", "`", "**", "*", "_",
    "~~", "\\*", "\\", "[", "](", ")", "https://x.org", "<b>", "&amp;", "\"'", "é", "日本", "🙂", "---\n", "    ", "\t"];
  for (let i = 0; i < count; i++) {
    let s = "";
    const n = 1 + rand(40);
    for (let j = 0; j < n; j++) s += atoms[rand(atoms.length)];
    yield s;
  }
}

test("markdown: every text node's offset points at its own characters", () => {
  for (const src of samples(3000)) {
    for (const node of textNodes(parseMarkdown(src))) {
      assert.equal(src.slice(node.at, node.at + node.text.length), node.text, JSON.stringify({ src, node }));
    }
  }
});

test("markdown: no raw HTML ever comes out", () => {
  for (const src of samples(2000)) {
    const html = toHtml(parseMarkdown(src));
    // The only tags are the renderer's own.
    for (const tag of html.match(/<\/?([a-z0-9]+)/g) || [])
      assert.match(tag, /^<\/?(p|h[1-6]|ul|ol|li|pre|code|blockquote|hr|strong|em|del|a)$/, src);
  }
  const html = toHtml(parseMarkdown('<img src=x onerror="alert(1)"> & `<script>`'));
  assert.equal(html, "<p>&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; <code>&lt;script&gt;</code></p>");
});

test("markdown: links only to http(s) and mailto", () => {
  assert.equal(toHtml(parseInline("[a](https://e.org/x_(y))")),
      '<a href="https://e.org/x_(y)" rel="noopener noreferrer" target="_blank">a</a>');
  assert.equal(toHtml(parseInline("[a](javascript:alert(1))")), "a");
  assert.equal(toHtml(parseInline("[a](data:text/html,x)")), "a");
  assert.equal(toHtml(parseInline('[a](https://e.org/"onclick=")')),
      '<a href="https://e.org/&quot;onclick=&quot;" rel="noopener noreferrer" target="_blank">a</a>');
});

test("markdown: blocks models write", () => {
  assert.equal(toHtml(parseMarkdown("# Title\n\nSome **bold**, *em*, _em_, ~~gone~~ and `x<y`.")),
      "<h1>Title</h1><p>Some <strong>bold</strong>, <em>em</em>, <em>em</em>, <del>gone</del> and <code>x&lt;y</code>.</p>");
  assert.equal(toHtml(parseMarkdown("- a\n- b\n  - c\n\n3. three\n4. four")),
      '<ul><li>a</li><li><p>b</p><ul><li>c</li></ul></li></ul><ol start="3"><li>three</li><li>four</li></ol>');
  assert.equal(toHtml(parseMarkdown("```py\nprint(1)\n\nx = 2\n```\nafter")),
      '<pre lang="py" closed="yes"><code>print(1)\n\nx = 2</code></pre><p>after</p>');
  assert.equal(toHtml(parseMarkdown("> quoted\n> more\n\n---")), "<blockquote><p>quoted\nmore</p></blockquote><hr>");
  assert.equal(toHtml(parseMarkdown("snake_case_name and 2 * 3 * 4")), "<p>snake_case_name and 2 * 3 * 4</p>");
  assert.equal(toHtml(parseMarkdown("\\*not em\\*")), "<p>*not em*</p>");
});

test("markdown: a fence still streaming is code to the end", () => {
  const tree = parseMarkdown("Here:\n```js\nconst a = 1;\nconst b");
  assert.equal(toHtml(tree), '<p>Here:</p><pre lang="js" closed="no"><code>const a = 1;\nconst b</code></pre>');
  assert.equal(textOf(tree[1]), "const a = 1;\nconst b");
  // Each prefix of a message renders (no throw), as it does while streaming.
  const full = "# T\n\n1. **a** `b`\n2. [c](https://d.e)\n\n```\nx\n```\n> q";
  for (let i = 0; i <= full.length; i++) parseMarkdown(full.slice(0, i));
});

const METRICS = `# HELP nextn:requests_total Requests received
# TYPE nextn:requests_total counter
nextn:requests_total 7
nextn:generation_tokens_total 1234
nextn:generation_tokens_per_second 812.5
nextn:kv_cache_bytes 3145728
nextn:kv_cache_compression_ratio 3.5
nextn:spec_decode_num_drafts_total 100
nextn:spec_decode_num_draft_tokens_total 300
nextn:spec_decode_num_accepted_tokens_total 150
nextn:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 80
nextn:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 50
nextn:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 20
nextn:spec_decode_draft_depth_bucket{le="0"} 12
nextn:spec_decode_draft_depth_bucket{le="1"} 12
nextn:spec_decode_draft_depth_bucket{le="2"} 42
nextn:spec_decode_draft_depth_bucket{le="+Inf"} 42
nextn:spec_decode_draft_depth_sum 60
nextn:spec_decode_draft_depth_count 42
odd_metric{a="x\\"y",b="line\\nbreak"} +Inf 1700000000
garbage line here
nan_metric NaN
`;

test("metrics: Prometheus text", () => {
  const m = parsePrometheus(METRICS);
  assert.equal(m["nextn:requests_total"][0].value, 7);
  assert.deepEqual(m.odd_metric[0].labels, { a: 'x"y', b: "line\nbreak" });
  assert.equal(m.odd_metric[0].value, Infinity);
  assert.ok(Number.isNaN(m.nan_metric[0].value));
  assert.equal(m.garbage, undefined);
  const s = serverSummary(m);
  assert.equal(s.acceptanceRate, 0.5);
  assert.equal(s.meanAcceptedLength, 2.5);
  assert.deepEqual(s.acceptancePerPos, [0.8, 0.5, 0.2]);
  assert.equal(s.kvBytes, 3145728);
  assert.equal(formatBytes(3145728), "3.0 MiB");
  // The depth histogram's cumulative buckets back to steps per depth.
  assert.deepEqual(s.stepsPerDepth, [12, 0, 30]);
  assert.equal(formatDepths(s.stepsPerDepth), "0 ×12 · 2 ×30");
  // Before the first speculative step there are no counters.
  const empty = serverSummary(parsePrometheus("nextn:requests_total 0\n"));
  assert.equal(empty.acceptanceRate, null);
  assert.deepEqual(empty.acceptancePerPos, []);
  assert.equal(formatDepths(empty.stepsPerDepth), "–");
});

test("sse: the same events however the bytes are split", () => {
  const stream = ': keep-alive\n\ndata: {"a":1}\n\ndata: {"b":"x\\n"}\r\n\r\nevent: e\ndata: l1\ndata: l2\n\ndata: [DONE]\n\n';
  const whole = [];
  new SseParser((d) => whole.push(d)).push(stream);
  assert.deepEqual(whole, ['{"a":1}', '{"b":"x\\n"}', "l1\nl2", "[DONE]"]);
  for (let cut = 1; cut < stream.length; cut++) {
    for (let cut2 = cut; cut2 < stream.length; cut2 += 7) {
      const got = [];
      const p = new SseParser((d) => got.push(d));
      p.push(stream.slice(0, cut));
      p.push(stream.slice(cut, cut2));
      p.push(stream.slice(cut2));
      assert.deepEqual(got, whole, `cuts ${cut},${cut2}`);
    }
  }
});

test("provenance: runs follow the text and steps rebuild acceptance", () => {
  const p = new Provenance();
  // Step 1: 3 drafts, 2 accepted, then the correction. Step 2: 3 drafts all accepted +
  // bonus. Step 3: no drafts. The bonus token released no text (a partial character);
  // the end entry carries the rest.
  const entries = [
    { source: "target", position: 1, drafts: 0, reasoning: "hm" },
    { source: "draft", position: 1, drafts: 3, reasoning: "m" },
    { source: "draft", position: 2, drafts: 3, content: "He" },
    { source: "correction", position: 3, drafts: 3, content: "llo" },
    { source: "draft", position: 1, drafts: 3, content: " w" },
    { source: "draft", position: 2, drafts: 3, content: "o" },
    { source: "draft", position: 3, drafts: 3, content: "rl" },
    { source: "bonus", position: 4, drafts: 3 },
    { source: "target", position: 1, drafts: 0, content: "d" },
    { content: "!" },
  ];
  for (const e of entries) p.add(e);
  assert.deepEqual(p.reasoning, [["src-target", 2], ["src-d1", 1]]);
  assert.deepEqual(p.content, [["src-d2", 2], ["src-fix", 3], ["src-d1", 2], ["src-d2", 1], ["src-d3", 2], ["src-target", 1], ["", 1]]);
  const s = p.summary();
  assert.equal(s.tokens, 9);
  assert.deepEqual(s.counts, { target: 2, draft: 5, correction: 1, bonus: 1 });
  assert.equal(s.acceptanceRate, 5 / 6);
  assert.equal(s.meanAcceptedLength, 1 + 5 / 2);
  assert.deepEqual(s.acceptancePerPos, [1, 1, 0.5]);
  assert.deepEqual(s.stepsPerDepth, [1, 0, 0, 2]);  // the first token is the prompt's; one plain step, two of 3 drafts
  assert.equal(sourceClass({ source: "draft", position: 9 }), "src-d4");
  // The rendered text "Hello world!" cut anywhere gets the classes of its characters.
  const text = "Hello world!";
  const perChar = [..."ddfffDDeEEt-"];
  const cls = { d: "src-d2", f: "src-fix", D: "src-d1", e: "src-d2", E: "src-d3", t: "src-target", "-": "" };
  for (let a = 0; a < text.length; a++)
    for (let b = a + 1; b <= text.length; b++) {
      const pieces = splitByRuns(p.content, text.slice(a, b), a);
      assert.equal(pieces.map((x) => x[1]).join(""), text.slice(a, b));
      let at = a;
      for (const [c, piece] of pieces)
        for (const _ of piece) assert.equal(c, cls[perChar[at++]], `${a}..${b} at ${at - 1}`);
    }
  // Text beyond the runs (still streaming) is untinted.
  assert.deepEqual(splitByRuns([["src-d1", 2]], "abcd", 0), [["src-d1", "ab"], ["", "cd"]]);
});
