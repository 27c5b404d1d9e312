// web/app.js — the chat page: conversations (kept in localStorage), streaming answers
// from /v1/chat/completions with nextn's token provenance, rendered as markdown with
// each character tinted by how its token came, and the speculation panel (this answer
// from the stream, the server from /metrics). Images (attached, pasted or dropped) go
// out as image_url parts with data: URLs when the model takes them. DOM is built with
// createElement and textContent only: model output never becomes HTML.
import { parseMarkdown, textOf } from "./markdown.js";
import { parsePrometheus, serverSummary, formatBytes, formatDepths } from "./metrics.js";
import { SseParser, Provenance, splitByRuns } from "./stream.js";

const $ = (id) => document.getElementById(id);
const STORE = { conversations: "nextn.conversations", current: "nextn.current", settings: "nextn.settings", key: "nextn.apiKey" };

// ---------- storage ----------

function load(key, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : JSON.parse(v);
  } catch {
    return fallback;
  }
}
function save(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch (e) {
    showBanner("Could not save to browser storage: " + e.message);
  }
}

const DEFAULT_SETTINGS = { system: "", temperature: "", top_p: "", max_tokens: "", num_draft_tokens: "", speculative: true, tint: true };
let settings = { ...DEFAULT_SETTINGS, ...load(STORE.settings, {}) };
let conversations = load(STORE.conversations, []);
if (!Array.isArray(conversations)) conversations = [];
let currentId = load(STORE.current, null);
// The DOM view of each shown message (kept out of the stored objects).
const views = new WeakMap();
let streaming = null;  // {controller, conv, msg, view, provenance, startedAt, firstTokenAt}
let model = { id: "", vision: false };  // from /v1/models; no attachments until it says so
let pending = [];  // images for the next message: [{name, url (data:)}]

function current() {
  return conversations.find((c) => c.id === currentId) || null;
}
function persist() {
  save(STORE.conversations, conversations);
  save(STORE.current, currentId);
}
function newConversation() {
  const conv = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 7), title: "New chat", created: Date.now(), messages: [] };
  conversations.unshift(conv);
  currentId = conv.id;
  persist();
  return conv;
}

// ---------- API ----------

function apiKey() {
  return localStorage.getItem(STORE.key) || "";
}

function askForKey() {
  return new Promise((resolve) => {
    const dialog = $("key-dialog");
    $("key-input").value = "";
    dialog.addEventListener("close", () => {
      const key = $("key-input").value.trim();
      if (key) localStorage.setItem(STORE.key, key);
      resolve(Boolean(key));
    }, { once: true });
    dialog.showModal();
  });
}

// fetch with the key; a 401 asks for the key once and retries.
async function api(path, init = {}, retried = false) {
  const headers = { ...(init.headers || {}) };
  const key = apiKey();
  if (key) headers.Authorization = "Bearer " + key;
  const res = await fetch(path, { ...init, headers });
  if (res.status === 401 && !retried) {
    if (await askForKey()) return api(path, init, true);
  }
  return res;
}

async function errorText(res) {
  try {
    const j = await res.json();
    return (j.error && j.error.message) || res.statusText;
  } catch {
    return res.status + " " + res.statusText;
  }
}

// ---------- rendering ----------

function elem(tag, props = {}, children = []) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// Text [at, at+len) of the source, as spans of one tint class each.
function tintedText(s, at, runs) {
  if (!runs || !runs.length) return [document.createTextNode(s)];
  return splitByRuns(runs, s, at).map(([cls, piece]) => (cls ? elem("span", { class: cls, text: piece }) : document.createTextNode(piece)));
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Plain-http pages on another host have no clipboard API.
    const area = elem("textarea", {}, []);
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  const label = button.textContent;
  button.textContent = "Copied";
  setTimeout(() => (button.textContent = label), 1200);
}

// Markdown tree → DOM.
function buildDom(nodes, runs) {
  const out = [];
  for (const n of nodes) {
    if ("text" in n) {
      out.push(...tintedText(n.text, n.at, runs));
      continue;
    }
    if (n.tag === "pre") {
      const code = elem("code", n.attrs.lang ? { "data-lang": n.attrs.lang } : {}, buildDom(n.children[0].children, runs));
      const text = textOf(n);
      const copy = elem("button", { class: "copy-code", type: "button", text: "Copy", "aria-label": "Copy code" });
      copy.addEventListener("click", () => copyText(text, copy));
      out.push(elem("pre", {}, [copy, code]));
      continue;
    }
    const attrs = {};
    if (n.tag === "a") Object.assign(attrs, { href: n.attrs.href, rel: n.attrs.rel, target: n.attrs.target });
    if (n.tag === "ol" && n.attrs && n.attrs.start) attrs.start = n.attrs.start;
    out.push(elem(n.tag, attrs, buildDom(n.children, runs)));
  }
  return out;
}

function toolCallView(call) {
  const fn = call.function || {};
  let args = fn.arguments || "";
  try {
    args = JSON.stringify(JSON.parse(args), null, 2);
  } catch { /* shown as sent */ }
  return elem("div", { class: "tool-call" }, [
    elem("div", {}, [document.createTextNode("Tool call "), elem("span", { class: "name", text: fn.name || "?" })]),
    elem("pre", {}, [elem("code", { text: args })]),
  ]);
}

// One message's DOM; update() refreshes it in place (the think block keeps its
// open/closed state while the answer streams).
function messageView(msg) {
  const body = elem("div", { class: "body" });
  const think = elem("details", { class: "think" }, [elem("summary", { text: "Reasoning" }), elem("div", { class: "body" })]);
  const tools = elem("div", { class: "tools" });
  const note = elem("span", { class: "note" });
  const copy = elem("button", { type: "button", text: "Copy", "aria-label": "Copy message" });
  copy.addEventListener("click", () => copyText(msg.content || "", copy));
  const role = elem("div", { class: "role" }, [elem("span", { text: msg.role === "user" ? "You" : "Assistant" }), note, elem("span", { class: "spacer" }), copy]);
  // A user message's images never change: built once.
  const images = elem("div", { class: "images" }, (msg.images || []).map(imageThumb));
  images.hidden = !(msg.images && msg.images.length);
  const root = elem("div", { class: "msg " + msg.role }, [role, think, body, images, tools]);
  const view = {
    root,
    update() {
      const runs = msg.sources || {};
      root.classList.toggle("tinted", Boolean(settings.tint));
      if (msg.role === "user") {
        body.textContent = msg.content;
      } else {
        body.replaceChildren(...buildDom(parseMarkdown(msg.content || ""), runs.content));
      }
      think.hidden = !msg.reasoning;
      if (msg.reasoning) {
        const live = streaming && streaming.msg === msg && !msg.content;
        think.firstChild.textContent = live ? "Thinking…" : `Reasoning (${msg.reasoning.length} characters)`;
        think.lastChild.replaceChildren(...tintedText(msg.reasoning, 0, runs.reasoning));
      }
      tools.replaceChildren(...(msg.tool_calls || []).map(toolCallView));
      const notes = [];
      if (msg.stopped) notes.push("stopped");
      if (msg.refused) notes.push("refused by the server: left out of later turns");
      if (msg.stats && msg.stats.tokensPerSecond) notes.push(`${msg.stats.tokens} tokens · ${msg.stats.tokensPerSecond.toFixed(1)} tok/s`);
      note.textContent = notes.join(" · ");
      if (msg.error) body.append(elem("p", { class: "error", text: msg.error }));
    },
  };
  view.update();
  return view;
}

// A conversation image: a thumbnail that opens the picture at full size.
function imageThumb(img) {
  const name = img.name || "image";
  return elem("button", { type: "button", class: "thumb", title: name, "aria-label": "View " + name,
                          onclick: () => showImage(img.url) }, [elem("img", { src: img.url, alt: name })]);
}

function showImage(url) {
  $("image-large").src = url;
  $("image-dialog").showModal();
}

function renderConversation() {
  const conv = current();
  const box = $("messages");
  box.replaceChildren();
  if (conv) for (const m of conv.messages) {
    const view = messageView(m);
    views.set(m, view);
    box.append(view.root);
  }
  box.scrollTop = box.scrollHeight;
  renderList();
  const last = conv && [...conv.messages].reverse().find((m) => m.role === "assistant");
  renderAnswerStats(last ? last.stats : null);
}

function renderList() {
  const list = $("conversations");
  list.replaceChildren();
  for (const c of conversations) {
    const open = elem("button", { class: "open", type: "button", text: c.title, title: c.title });
    open.addEventListener("click", () => {
      if (streaming) return;
      currentId = c.id;
      persist();
      renderConversation();
      $("sidebar").classList.remove("open");
      $("prompt").focus();
    });
    const del = elem("button", { class: "delete", type: "button", text: "✕", "aria-label": "Delete " + c.title });
    del.addEventListener("click", () => {
      if (streaming && streaming.conv === c) return;
      conversations = conversations.filter((x) => x !== c);
      if (currentId === c.id) currentId = conversations.length ? conversations[0].id : null;
      persist();
      renderConversation();
    });
    list.append(elem("li", { class: c.id === currentId ? "current" : "" }, [open, del]));
  }
}

function statRows(dl, rows) {
  dl.replaceChildren(...rows.flatMap(([k, v]) => [elem("dt", { text: k }), elem("dd", { text: v })]));
}
// A bar's fill (sized through CSSOM: the page's CSP allows no style attributes).
function fill(rate) {
  const f = elem("span", { class: "fill" });
  f.style.width = Math.round(Math.max(0, Math.min(1, rate)) * 100) + "%";
  return f;
}
function bars(box, perPos) {
  box.replaceChildren(...perPos.map((rate, k) => elem("div", { class: "bar" }, [
    elem("span", { text: "pos " + (k + 1) }),
    elem("span", { class: "track" }, [fill(rate)]),
    elem("span", { class: "pct", text: (rate * 100).toFixed(0) + "%" }),
  ])));
}
const pct = (x) => (x === null || x === undefined ? "–" : (x * 100).toFixed(1) + "%");
const num = (x, d = 2) => (x === null || x === undefined ? "–" : x.toFixed(d));

function renderAnswerStats(stats) {
  const s = stats || {};
  const c = s.counts || {};
  statRows($("answer-stats"), [
    ["tokens", String(s.tokens || 0)],
    ["tokens/s", num(s.tokensPerSecond, 1)],
    ["accepted drafts", String(c.draft || 0)],
    ["corrections", String(c.correction || 0)],
    ["bonus", String(c.bonus || 0)],
    ["no drafting", String(c.target || 0)],
    ["acceptance", pct(s.acceptanceRate)],
    ["mean accepted length", num(s.meanAcceptedLength)],
    ["depths chosen", formatDepths(s.stepsPerDepth)],
  ]);
  bars($("answer-pos"), s.acceptancePerPos || []);
}

async function refreshServerStats() {
  try {
    const res = await fetch("/metrics");
    if (!res.ok) return;
    const m = serverSummary(parsePrometheus(await res.text()));
    statRows($("server-stats"), [
      ["requests", String(m.requests)],
      ["tokens generated", String(m.generatedTokens)],
      ["tokens/s (avg)", num(m.tokensPerSecond, 1)],
      ["acceptance", pct(m.acceptanceRate)],
      ["mean accepted length", num(m.meanAcceptedLength)],
      ["depths chosen", formatDepths(m.stepsPerDepth)],
      ["KV cache", formatBytes(m.kvBytes) + (m.kvCompression > 1.01 ? ` (×${m.kvCompression.toFixed(1)} smaller)` : "")],
      ["memory (RSS)", formatBytes(m.residentBytes)],
    ]);
    bars($("server-pos"), m.acceptancePerPos);
  } catch { /* the server is restarting: the next refresh will tell */ }
}

function showBanner(text) {
  const box = $("messages");
  box.append(elem("p", { class: "error", role: "alert", text }));
}

// ---------- sending ----------

function requestBody(conv) {
  const messages = [];
  if (settings.system.trim()) messages.push({ role: "system", content: settings.system });
  for (const m of conv.messages) {
    if (m === streaming?.msg) continue;
    // A message the server refused (a bad image, too large) would be refused again in
    // every later turn: the model never saw it, so it is not resent.
    if (m.refused) continue;
    if (m.role === "assistant" && !m.content && !(m.tool_calls && m.tool_calls.length)) continue;
    const out = { role: m.role, content: m.images && m.images.length ? contentParts(m) : m.content || "" };
    if (m.tool_calls && m.tool_calls.length) out.tool_calls = m.tool_calls;
    messages.push(out);
  }
  const body = { messages, stream: true, stream_options: { include_usage: true }, nextn: { token_sources: true } };
  const number = (v) => (v === "" || v === null || v === undefined ? undefined : Number(v));
  if (number(settings.temperature) !== undefined) body.temperature = number(settings.temperature);
  if (number(settings.top_p) !== undefined) body.top_p = number(settings.top_p);
  if (number(settings.max_tokens) !== undefined) body.max_tokens = number(settings.max_tokens);
  if (!settings.speculative) body.speculative = false;
  else if (number(settings.num_draft_tokens) !== undefined) body.num_draft_tokens = number(settings.num_draft_tokens);
  return body;
}

// A user message with images as OpenAI content parts: its text, then one image_url part per
// image. Images stay in the history, so every later turn sends them again.
function contentParts(m) {
  const parts = m.content ? [{ type: "text", text: m.content }] : [];
  return parts.concat(m.images.map((img) => ({ type: "image_url", image_url: { url: img.url } })));
}

function setStreamingUi(on) {
  $("send").hidden = on;
  $("stop").hidden = !on;
  document.body.classList.toggle("streaming", on);
}

let frame = 0;
function scheduleUpdate() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    if (!streaming) return;
    const box = $("messages");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    streaming.msg.stats = liveStats();
    views.get(streaming.msg)?.update();
    renderAnswerStats(streaming.msg.stats);
    if (atBottom) box.scrollTop = box.scrollHeight;
  });
}

function liveStats() {
  const s = streaming;
  const summary = s.provenance.summary();
  const t = s.timings;
  let tps = null;
  if (t && t.predicted_per_second) tps = t.predicted_per_second;
  else if (s.firstTokenAt && summary.tokens > 1) tps = (summary.tokens - 1) / ((performance.now() - s.firstTokenAt) / 1000);
  return { ...summary, tokensPerSecond: tps };
}

function handleChunk(data) {
  const s = streaming;
  if (data === "[DONE]") return;
  let j;
  try {
    j = JSON.parse(data);
  } catch {
    return;
  }
  if (j.error) {
    s.msg.error = j.error.message || "generation failed";
    return;
  }
  const choice = j.choices && j.choices[0];
  if (!choice) return;
  const d = choice.delta || {};
  const entries = choice.nextn && choice.nextn.tokens;
  if (entries) {
    for (const e of entries) s.provenance.add(e);
  } else {
    if (d.content) s.provenance.addUntracked("content", d.content.length);
    if (d.reasoning_content) s.provenance.addUntracked("reasoning", d.reasoning_content.length);
  }
  if (d.reasoning_content) s.msg.reasoning = (s.msg.reasoning || "") + d.reasoning_content;
  if (d.content) s.msg.content += d.content;
  if (d.tool_calls) s.msg.tool_calls = (s.msg.tool_calls || []).concat(d.tool_calls.map(({ id, type, function: f }) => ({ id, type, function: f })));
  if ((d.content || d.reasoning_content || entries) && !s.firstTokenAt) s.firstTokenAt = performance.now();
  if (j.timings) s.timings = j.timings;
  s.msg.sources = { content: s.provenance.content, reasoning: s.provenance.reasoning };
  scheduleUpdate();
}

async function send(text, images = []) {
  if (streaming || (!text.trim() && !images.length)) return;
  const conv = current() || newConversation();
  if (!conv.messages.length) conv.title = text.trim().replace(/\s+/g, " ").slice(0, 48) || "Image";
  const user = images.length ? { role: "user", content: text, images } : { role: "user", content: text };
  conv.messages.push(user);
  const msg = { role: "assistant", content: "" };
  conv.messages.push(msg);
  persist();
  renderConversation();
  const controller = new AbortController();
  streaming = { controller, conv, msg, provenance: new Provenance(), firstTokenAt: 0, timings: null };
  setStreamingUi(true);
  try {
    const res = await api("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(requestBody(conv)),
      signal: controller.signal,
    });
    if (!res.ok) {
      msg.error = await errorText(res);
      user.refused = true;
    } else {
      const parser = new SseParser(handleChunk);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(decoder.decode(value, { stream: true }));
      }
    }
  } catch (e) {
    if (e.name === "AbortError") msg.stopped = true;
    else msg.error = "connection failed: " + e.message;
  }
  msg.stats = liveStats();
  if (streaming.timings) msg.timings = streaming.timings;
  streaming = null;
  setStreamingUi(false);
  persist();
  views.get(msg)?.update();
  if (user.refused) views.get(user)?.update();
  renderAnswerStats(msg.stats);
  refreshServerStats();
}

function stop() {
  if (streaming) streaming.controller.abort();
}

// ---------- images ----------

// The formats the server decodes (src/vision/image.cc); anything else is refused here.
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"];

function attachNote(text) {
  $("attach-note").textContent = text;
  $("attach-note").hidden = !text;
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

// Files from the picker, a paste or a drop become pending images (data: URLs, read here
// so that the conversation can keep and resend them).
async function attachFiles(files) {
  files = [...files];
  if (!files.length) return;
  if (!model.vision) {
    attachNote(`${model.id || "This model"} does not take images (it has no vision encoder).`);
    return;
  }
  const refused = [];
  for (const file of files) {
    if (!IMAGE_TYPES.includes(file.type)) {
      refused.push(`${file.name || "pasted item"}: not a PNG, JPEG, WebP or GIF image`);
      continue;
    }
    try {
      pending.push({ name: file.name, url: await readAsDataUrl(file) });
    } catch (e) {
      refused.push(`${file.name}: ${e.message}`);
    }
  }
  attachNote(refused.length ? "Not attached: " + refused.join("; ") : "");
  renderAttachments();
}

function renderAttachments() {
  const box = $("attachments");
  box.replaceChildren(...pending.map((img) => {
    const name = img.name || "image";
    const remove = elem("button", { type: "button", class: "remove", text: "✕", "aria-label": "Remove " + name });
    remove.addEventListener("click", () => {
      pending = pending.filter((p) => p !== img);
      renderAttachments();
      $("prompt").focus();
    });
    return elem("span", { class: "thumb", title: name }, [elem("img", { src: img.url, alt: name }), remove]);
  }));
  box.hidden = !pending.length;
}

function initAttachments() {
  $("attach").addEventListener("click", () => $("file-input").click());
  $("file-input").addEventListener("change", () => {
    attachFiles($("file-input").files);
    $("file-input").value = "";  // choosing the same file again is a change too
  });
  $("prompt").addEventListener("paste", (e) => {
    const files = e.clipboardData ? e.clipboardData.files : [];
    if (!files.length) return;  // text: pasted as usual
    // A copied image often comes with its HTML or URL too: the image is what is meant.
    e.preventDefault();
    attachFiles(files);
  });
  // Files dropped anywhere on the page are attached (and never open in its place).
  const hasFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files");
  document.addEventListener("dragover", (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    document.body.classList.add("dropping");
  });
  document.addEventListener("dragleave", (e) => {
    if (!e.relatedTarget) document.body.classList.remove("dropping");
  });
  document.addEventListener("drop", (e) => {
    document.body.classList.remove("dropping");
    if (!hasFiles(e)) return;
    e.preventDefault();
    attachFiles(e.dataTransfer.files);
  });
  $("image-dialog").addEventListener("click", () => $("image-dialog").close());
}

// ---------- settings ----------

function openSettings() {
  $("set-system").value = settings.system;
  $("set-temperature").value = settings.temperature;
  $("set-top-p").value = settings.top_p;
  $("set-max-tokens").value = settings.max_tokens;
  $("set-draft-tokens").value = settings.num_draft_tokens;
  $("set-speculative").checked = settings.speculative;
  $("set-api-key").value = apiKey();
  $("settings-dialog").showModal();
}

function closeSettings() {
  if ($("settings-dialog").returnValue !== "save") return;
  settings = {
    ...settings,
    system: $("set-system").value,
    temperature: $("set-temperature").value,
    top_p: $("set-top-p").value,
    max_tokens: $("set-max-tokens").value,
    num_draft_tokens: $("set-draft-tokens").value,
    speculative: $("set-speculative").checked,
  };
  save(STORE.settings, settings);
  const key = $("set-api-key").value.trim();
  if (key) localStorage.setItem(STORE.key, key);
  else localStorage.removeItem(STORE.key);
}

// ---------- start ----------

async function showModel() {
  try {
    const res = await api("/v1/models");
    if (!res.ok) return;
    const j = await res.json();
    const m = j.data && j.data[0];
    if (!m) return;
    $("model-name").textContent = m.id + (m.max_model_len ? ` · ${m.max_model_len} ctx` : "");
    model = { id: m.id, vision: Boolean(m.meta && m.meta.vision) };
    $("attach").disabled = !model.vision;
    if (!model.vision) $("attach").title = `${m.id} does not take images (no vision encoder)`;
  } catch { /* shown on the first send */ }
}

// A server started with --api-key: ask for the key before the first call that needs it.
async function checkKeyNeeded() {
  try {
    const res = await fetch("/health");
    const j = await res.json();
    if (j.api_key_required && !apiKey()) await askForKey();
  } catch { /* loading or unreachable: the first call will tell */ }
}

function init() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("prompt").value;
    if ((!text.trim() && !pending.length) || streaming) return;
    const images = pending;
    pending = [];
    renderAttachments();
    attachNote("");
    $("prompt").value = "";
    send(text, images);
  });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && streaming) stop();
    if (e.key.toLowerCase() === "o" && e.shiftKey && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      $("new-chat").click();
    }
  });
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", () => {
    if (streaming) return;
    newConversation();
    renderConversation();
    $("prompt").focus();
  });
  $("open-settings").addEventListener("click", openSettings);
  $("settings-dialog").addEventListener("close", closeSettings);
  $("toggle-sidebar").addEventListener("click", () => {
    const open = $("sidebar").classList.toggle("open");
    $("toggle-sidebar").setAttribute("aria-expanded", String(open));
  });
  $("toggle-panel").addEventListener("click", () => {
    const collapsed = $("panel").classList.toggle("collapsed");
    $("toggle-panel").setAttribute("aria-expanded", String(!collapsed));
  });
  $("show-tint").checked = settings.tint;
  $("show-tint").addEventListener("change", () => {
    settings.tint = $("show-tint").checked;
    save(STORE.settings, settings);
    for (const m of current()?.messages || []) views.get(m)?.update();
  });
  initAttachments();
  renderConversation();
  checkKeyNeeded().then(showModel);
  refreshServerStats();
  setInterval(() => {
    if (!document.hidden) refreshServerStats();
  }, 3000);
  $("prompt").focus();
}

init();
