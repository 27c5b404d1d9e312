// web/markdown.js — a small markdown renderer for chat answers, safe by construction.
// parseMarkdown(text) returns a tree of plain objects, never HTML: element nodes
// {tag, attrs?, children} and text nodes {text, at}, where `at` is the offset of the
// text's first character in the source (so the page can tint each character by the
// token it came from). The page builds DOM from the tree with createElement and
// textContent only; toHtml() (escaping every text and attribute) is for tests.
// Covers what models write: headings, paragraphs, fenced code (an unclosed fence
// while streaming is code to the end), bullet and numbered lists, block quotes,
// rules, pipe-less line breaks, `code`, **strong**, *em* / _em_, ~~del~~ and
// [links](http…) with http(s)/mailto targets only.

const SAFE_URL = /^(https?:|mailto:)/i;

function text(s, at) {
  return { text: s, at };
}

function el(tag, children, attrs) {
  const node = { tag, children };
  if (attrs) node.attrs = attrs;
  return node;
}

// Inline markup of src[start, end) → nodes.
export function parseInline(src, start = 0, end = src.length) {
  const out = [];
  let plain = start;  // start of the pending plain text
  const flush = (upto) => {
    if (upto > plain) out.push(text(src.slice(plain, upto), plain));
  };
  let i = start;
  while (i < end) {
    const c = src[i];
    if (c === "\\" && i + 1 < end && /[\\`*_~\[\]()#>+\-.!|]/.test(src[i + 1])) {
      flush(i);
      out.push(text(src[i + 1], i + 1));
      i += 2;
      plain = i;
      continue;
    }
    if (c === "`") {
      let ticks = 1;
      while (i + ticks < end && src[i + ticks] === "`") ticks++;
      const fence = "`".repeat(ticks);
      const close = src.indexOf(fence, i + ticks);
      if (close !== -1 && close + ticks <= end) {
        flush(i);
        out.push(el("code", [text(src.slice(i + ticks, close), i + ticks)]));
        i = close + ticks;
        plain = i;
        continue;
      }
      i += ticks;
      continue;
    }
    if (c === "*" || c === "_" || c === "~") {
      const double = src[i + 1] === c;
      if (c === "~" && !double) {
        i++;
        continue;
      }
      const marker = double ? c + c : c;
      const inner = i + marker.length;
      // Opening markers must touch a non-space; `_` inside a word is a letter.
      const wordy = c === "_" && i > 0 && /\w/.test(src[i - 1]);
      if (!wordy && inner < end && !/\s/.test(src[inner])) {
        let close = src.indexOf(marker, inner + 1);
        while (close !== -1 && close < end && (/\s/.test(src[close - 1]) || (!double && src[close + 1] === c)))
          close = src.indexOf(marker, close + 1);
        if (close !== -1 && close + marker.length <= end) {
          flush(i);
          const tag = c === "~" ? "del" : double ? "strong" : "em";
          out.push(el(tag, parseInline(src, inner, close)));
          i = close + marker.length;
          plain = i;
          continue;
        }
      }
      i += marker.length;
      continue;
    }
    if (c === "[") {
      const closeText = findClosingBracket(src, i, end);
      if (closeText !== -1 && src[closeText + 1] === "(") {
        const closeUrl = findClosingParen(src, closeText + 1, end);
        if (closeUrl !== -1 && closeUrl < end) {
          const url = src.slice(closeText + 2, closeUrl).trim();
          flush(i);
          const label = parseInline(src, i + 1, closeText);
          if (SAFE_URL.test(url)) out.push(el("a", label, { href: url, rel: "noopener noreferrer", target: "_blank" }));
          else out.push(...label);  // unsafe or relative target: the label only
          i = closeUrl + 1;
          plain = i;
          continue;
        }
      }
    }
    i++;
  }
  flush(end);
  return out;
}

// The `)` that closes the `(` at `open` (URLs may hold balanced parentheses).
function findClosingParen(src, open, end) {
  let depth = 0;
  for (let i = open; i < end; i++) {
    if (src[i] === "(") depth++;
    else if (src[i] === ")" && --depth === 0) return i;
    else if (src[i] === "\n") return -1;
  }
  return -1;
}

function findClosingBracket(src, open, end) {
  let depth = 0;
  for (let i = open; i < end; i++) {
    if (src[i] === "\\") {
      i++;
    } else if (src[i] === "[") {
      depth++;
    } else if (src[i] === "]") {
      if (--depth === 0) return i;
    } else if (src[i] === "\n" && src[i + 1] === "\n") {
      return -1;
    }
  }
  return -1;
}

// Lines of src with their offsets.
function splitLines(src) {
  const lines = [];
  let at = 0;
  for (;;) {
    const nl = src.indexOf("\n", at);
    if (nl === -1) {
      lines.push({ s: src.slice(at), at });
      return lines;
    }
    lines.push({ s: src.slice(at, nl), at });
    at = nl + 1;
  }
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)([-*+])\s+/;
const NUMBERED = /^(\s*)(\d{1,9})[.)]\s+/;
const QUOTE = /^ {0,3}>\s?/;

function isBlockStart(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || BULLET.test(line) ||
      NUMBERED.test(line) || QUOTE.test(line);
}

// Inline content of consecutive lines, line by line (so quote markers and indents
// stay out), joined by their newlines (kept as text: the page shows line breaks).
function inlineOfLines(src, lines, from, to) {
  const out = [];
  for (let i = from; i < to; i++) {
    const l = lines[i];
    if (i > from) out.push(text("\n", lines[i - 1].at + lines[i - 1].s.length));
    out.push(...parseInline(src, l.at + l.skip, l.at + l.s.length));
  }
  return out;
}

// Blocks of the whole source.
export function parseMarkdown(src) {
  const lines = splitLines(src).map((l) => ({ ...l, skip: 0 }));
  return parseBlocks(src, lines, 0, lines.length);
}

function parseBlocks(src, lines, from, to) {
  const blocks = [];
  let i = from;
  while (i < to) {
    const line = lines[i];
    const s = line.s.slice(line.skip);
    const base = line.at + line.skip;
    if (/^\s*$/.test(s)) {
      i++;
      continue;
    }
    let m;
    if ((m = FENCE.exec(s))) {
      const marker = m[1];
      let j = i + 1;
      while (j < to && !new RegExp("^ {0,3}" + marker[0] + "{" + marker.length + ",}\\s*$").test(lines[j].s.slice(lines[j].skip))) j++;
      const bodyStart = i + 1 < lines.length ? lines[i + 1].at + lines[i + 1].skip : src.length;
      const bodyEnd = j < to ? lines[j].at - 1 : lines[to - 1].at + lines[to - 1].s.length;
      const code = bodyEnd > bodyStart ? src.slice(bodyStart, bodyEnd) : "";
      const attrs = { lang: m[2] || "", closed: j < to ? "yes" : "no" };
      blocks.push(el("pre", [el("code", code ? [text(code, bodyStart)] : [])], attrs));
      i = j + 1;
      continue;
    }
    if ((m = HEADING.exec(s))) {
      const level = m[1].length;
      const contentAt = base + s.indexOf(m[2], m[1].length);
      blocks.push(el("h" + level, parseInline(src, contentAt, contentAt + m[2].length)));
      i++;
      continue;
    }
    if (RULE.test(s)) {
      blocks.push(el("hr", []));
      i++;
      continue;
    }
    if (QUOTE.test(s)) {
      let j = i;
      const inner = [];
      while (j < to && QUOTE.test(lines[j].s.slice(lines[j].skip))) {
        const ls = lines[j].s.slice(lines[j].skip);
        inner.push({ ...lines[j], skip: lines[j].skip + QUOTE.exec(ls)[0].length });
        j++;
      }
      blocks.push(el("blockquote", parseBlocks(src, inner, 0, inner.length)));
      i = j;
      continue;
    }
    const bullet = BULLET.exec(s), numbered = NUMBERED.exec(s);
    if (bullet || numbered) {
      const ordered = !bullet;
      const pattern = ordered ? NUMBERED : BULLET;
      const indent = (bullet || numbered)[1].length;
      const items = [];
      let j = i;
      while (j < to) {
        const ls = lines[j].s.slice(lines[j].skip);
        const im = pattern.exec(ls);
        if (!im || im[1].length !== indent) break;
        // The item: its first line and every following line indented past the marker
        // (nested lists included) or continuing the paragraph.
        const itemLines = [{ ...lines[j], skip: lines[j].skip + im[0].length }];
        let k = j + 1;
        while (k < to) {
          const ks = lines[k].s.slice(lines[k].skip);
          if (/^\s*$/.test(ks)) {
            const next = k + 1 < to ? lines[k + 1].s.slice(lines[k + 1].skip) : "";
            if (/^\s+\S/.test(next) && next.search(/\S/) > indent) {
              k++;
              continue;
            }
            break;
          }
          const lead = ks.search(/\S/);
          if (lead > indent) {
            itemLines.push({ ...lines[k], skip: lines[k].skip + Math.min(lead, im[0].length) });
          } else if (!isBlockStart(ks) && !/^\s*$/.test(lines[k - 1].s)) {
            itemLines.push({ ...lines[k], skip: lines[k].skip + lead });
          } else {
            break;
          }
          k++;
        }
        const content = parseBlocks(src, itemLines, 0, itemLines.length);
        // A tight item's single paragraph is shown without the paragraph margin.
        const children = content.length === 1 && content[0].tag === "p" ? content[0].children : content;
        items.push(el("li", children));
        j = k;
        while (j < to && /^\s*$/.test(lines[j].s) && j + 1 < to && pattern.test(lines[j + 1].s.slice(lines[j + 1].skip)))
          j++;
      }
      const attrs = ordered && numbered[2] !== "1" ? { start: String(parseInt(numbered[2], 10)) } : undefined;
      blocks.push(el(ordered ? "ol" : "ul", items, attrs));
      i = j;
      continue;
    }
    // A paragraph: up to a blank line or the start of another block.
    let j = i + 1;
    while (j < to) {
      const ls = lines[j].s.slice(lines[j].skip);
      if (/^\s*$/.test(ls) || isBlockStart(ls)) break;
      j++;
    }
    const para = lines.slice(i, j).map((l) => ({ ...l, skip: l.skip + l.s.slice(l.skip).search(/\S|$/) }));
    blocks.push(el("p", inlineOfLines(src, para, 0, para.length)));
    i = j;
  }
  return blocks;
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// The tree as HTML text, every text and attribute escaped (tests and debugging; the
// page itself builds DOM nodes).
export function toHtml(nodes) {
  return nodes
      .map((n) => {
        if ("text" in n) return escapeHtml(n.text);
        const attrs = Object.entries(n.attrs || {})
            .map(([k, v]) => ` ${k}="${escapeHtml(v)}"`)
            .join("");
        if (n.tag === "hr") return "<hr>";
        return `<${n.tag}${attrs}>${toHtml(n.children)}</${n.tag}>`;
      })
      .join("");
}

// The plain text of a subtree (code copy buttons).
export function textOf(node) {
  if ("text" in node) return node.text;
  return node.children.map(textOf).join("");
}
