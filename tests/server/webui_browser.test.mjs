// tests/server/webui_browser.test.mjs — the built-in chat page in a real browser:
// Debian's headless Chromium driven by puppeteer-core against `nextn serve --mtp
// --api-key` on the tiny model (models/nextn-tiny, trained, with an MTP head).
// The page asks for the key once; a message streams in and equals the same request's
// answer from the API; its tokens are tinted, and the tint counts and the panel's
// acceptance figures equal the final chunk's timings; the server panel (parsed from
// /metrics) equals /health's JSON; Stop ends an answer mid-stream and the server counts the
// cancellation; after a reload the conversation (tints included) is still there and
// no key is asked again; a phone-sized screen has no sideways scrolling; no console
// errors throughout. Screenshots go to $NEXTN_BUILD_DIR/test-artifacts/webui/.
// Also: --no-webui serves no page; OpenAI clients see no nextn field unless asked; and in
// Chromium and Firefox a scripted stream with reasoning, code, a tool call and
// HTML-looking text renders as it should (last tests).
import test from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { startServer, stopServer } from "./serve.mjs";

const SRC = process.env.NEXTN_SOURCE_DIR ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const BUILD = process.env.NEXTN_BUILD_DIR ?? path.join(SRC, "build");
const SHOTS = path.join(BUILD, "test-artifacts", "webui");
const MODEL = path.join(SRC, "models", "nextn-tiny");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const KEY = "webui-test-key";
const require = createRequire(path.join(SRC, "tests/package.json"));
const puppeteer = require("puppeteer-core");


// All data payloads of a streamed answer.
async function streamChunks(url, body) {
  const res = await fetch(url + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + KEY },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  return text.split("\n\n").filter((b) => b.startsWith("data: ")).map((b) => b.slice(6)).filter((d) => d !== "[DONE]")
      .map((d) => JSON.parse(d));
}

const PROMPT = "The history of the printing press";

test("--no-webui: no page at /", async () => {
  const { proc, ready } = await startServer("webui", MODEL, 2, ["--no-webui"]);
  try {
    const res = await fetch(ready.url + "/");
    assert.equal(res.status, 404);
    assert.equal((await fetch(ready.url + "/webui/app.js")).status, 404);
    assert.equal(ready.webui, false);
  } finally {
    assert.equal(await stopServer(proc), 0);
  }
});

test("the chat page in Chromium", { timeout: 300000 }, async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: scripts/setup.sh --tests installs it`);
  mkdirSync(SHOTS, { recursive: true });
  // A fixed depth: under `auto` the planner may decide drafting does not pay on this machine,
  // and the page's draft tints are what this test looks at.
  const { proc, ready } = await startServer("webui", MODEL, 2, ["--mtp", "--num-mtp-tokens", "2", "--api-key", KEY,
                                                                 "--max-tokens", "120"]);
  const url = ready.url;
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  const problems = [];
  try {
    // The page and its files come with the headers that keep them self-contained.
    const index = await fetch(url + "/");
    assert.equal(index.status, 200);
    assert.match(index.headers.get("content-security-policy"), /default-src 'none'/);
    assert.match(index.headers.get("content-type"), /^text\/html/);
    assert.match(await index.text(), /<script type="module" src="\/webui\/app.js">/);

    // OpenAI clients see today's stream: no nextn field unless asked for.
    const plain = await streamChunks(url, { messages: [{ role: "user", content: PROMPT }], max_tokens: 24 });
    assert.ok(plain.every((c) => !c.choices?.[0]?.nextn), "nextn field without asking");
    const asked = await streamChunks(url, { messages: [{ role: "user", content: PROMPT }], max_tokens: 24,
                                            nextn: { token_sources: true } });
    const text = (chunks) => chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    assert.equal(text(asked), text(plain));
    const entries = asked.flatMap((c) => c.choices?.[0]?.nextn?.tokens ?? []);
    assert.equal(entries.map((e) => e.content ?? "").join(""), text(asked));
    assert.equal(entries.filter((e) => e.source).length, asked.at(-1).timings.predicted_n);
    // Legacy completions too: entries carry `text`.
    const completion = await fetch(url + "/v1/completions", {
      method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + KEY },
      body: JSON.stringify({ prompt: PROMPT, max_tokens: 24, stream: true, nextn: { token_sources: true } }) });
    const cchunks = (await completion.text()).split("\n\n").filter((b) => b.startsWith("data: {"))
        .map((b) => JSON.parse(b.slice(6)));
    const centries = cchunks.flatMap((c) => c.choices?.[0]?.nextn?.tokens ?? []);
    assert.equal(centries.map((e) => e.text ?? "").join(""), cchunks.map((c) => c.choices?.[0]?.text ?? "").join(""));
    assert.equal(centries.filter((e) => e.source).length, cchunks.at(-1).timings.predicted_n);
    assert.ok(centries.some((e) => e.source === "draft"), "no accepted draft in 24 tokens with --mtp");

    const page = await browser.newPage();
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warn") problems.push(`console.${m.type()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push("page error: " + e.message));
    page.on("requestfailed", (r) => {
      // The stopped answer's request is aborted on purpose.
      if (!(r.url().endsWith("/v1/chat/completions") && r.failure()?.errorText === "net::ERR_ABORTED"))
        problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
    });
    await page.setViewport({ width: 1280, height: 860 });
    await page.goto(url + "/", { waitUntil: "load" });

    // The key is asked for once.
    await page.waitForSelector("#key-dialog[open]", { timeout: 10000 });
    await page.type("#key-input", KEY);
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.getElementById("model-name").textContent.includes("nextn-tiny"));

    // A message, by keyboard: type, Enter.
    await page.focus("#prompt");
    await page.keyboard.type(PROMPT);
    await page.keyboard.press("Enter");
    await page.waitForSelector(".msg.assistant");
    await page.waitForFunction(() => !document.body.classList.contains("streaming"), { timeout: 60000 });
    const stored = await page.evaluate(() => JSON.parse(localStorage.getItem("nextn.conversations")));
    assert.equal(stored.length, 1);
    const [user, answer] = stored[0].messages;
    assert.equal(user.content, PROMPT);
    assert.ok(answer.content.length > 0, "empty answer");
    assert.ok(!answer.error, answer.error);
    // Greedy (the server's default): the same as the API's answer to the same request.
    const direct = await streamChunks(url, { messages: [{ role: "user", content: PROMPT }] });
    assert.equal(answer.content, text(direct));
    const timings = answer.timings;  // the final chunk's, as the page received it
    assert.ok(timings.draft_steps > 0, "no drafting with --mtp");

    // Tinting: the runs cover the answer, and the tinted characters are on the page.
    const runLength = (runs) => runs.reduce((n, r) => n + r[1], 0);
    assert.equal(runLength(answer.sources.content), answer.content.length);
    const tints = await page.evaluate(() => {
      const count = (sel) => document.querySelectorAll(".msg.assistant " + sel).length;
      return { draft: count("[class^=src-d]"), fix: count(".src-fix"), bonus: count(".src-bonus"),
               tinted: document.querySelector(".msg.assistant").classList.contains("tinted") };
    });
    assert.ok(tints.tinted);
    assert.ok(tints.draft > 0, "no accepted draft tinted with --mtp: " + JSON.stringify(tints));
    // The page's own figures, rebuilt from the token entries, equal the server's timings.
    assert.equal(answer.stats.tokens, timings.predicted_n);
    assert.equal(answer.stats.counts.draft, timings.draft_n_accepted);
    assert.equal(answer.stats.counts.correction + answer.stats.counts.bonus, timings.draft_steps);
    assert.deepEqual(answer.stats.acceptedPerPos, timings.draft_accepted_per_pos);
    assert.deepEqual(answer.stats.draftedPerPos, timings.draft_drafted_per_pos);
    const panel = await page.$$eval("#answer-stats dd", (dd) => dd.map((d) => d.textContent));
    assert.equal(panel[0], String(timings.predicted_n));
    assert.equal(panel[7], (1 + timings.draft_n_accepted / timings.draft_steps).toFixed(2));
    // The depths chosen per step, rebuilt by the page, equal the server's count.
    assert.deepEqual(answer.stats.stepsPerDepth, timings.draft_depths);
    assert.ok(/^\d+ ×\d+/.test(panel[8]), "depths chosen: " + panel[8]);

    // The server panel shows /metrics (read here with the same counters from /health).
    // The server panel parses /metrics; /health has the same counters as JSON.
    await page.evaluate(() => new Promise((r) => setTimeout(r, 3500)));  // one refresh period
    const serverPanel = await page.$$eval("#server-stats dd", (dd) => dd.map((d) => d.textContent));
    const health = await (await fetch(url + "/health")).json();
    const spec = health.speculative;
    assert.equal(serverPanel[0], String(health.requests.total));
    assert.equal(serverPanel[1], String(health.tokens.generated_total));
    assert.equal(serverPanel[3], (100 * spec.num_accepted_tokens / spec.num_draft_tokens_total).toFixed(1) + "%");
    assert.equal(serverPanel[4], (1 + spec.num_accepted_tokens / spec.num_drafts).toFixed(2));
    const depths = spec.steps_per_depth.map((n, k) => (n > 0 ? `${k} ×${n}` : "")).filter((x) => x).join(" · ");
    assert.equal(serverPanel[5], depths);
    assert.ok(health.kv_cache.bytes_used > 0 && /[KMG]iB$/.test(serverPanel[6]), "KV cache size: " + serverPanel[6]);
    const metricsText = await (await fetch(url + "/metrics")).text();
    await page.screenshot({ path: path.join(SHOTS, "chat-desktop.png") });

    // Reasoning and markdown: a second answer is rendered as blocks, not raw text.
    assert.ok(await page.$eval(".msg.assistant > .body", (b) => b.children.length > 0));

    // Stop mid-answer: the answer would run to the context's end (ignore_eos added
    // to the page's request here), Stop ends it; the server counts the cancellation.
    const cancelledBefore = Number(/^nextn:requests_cancelled_total (\S+)$/m.exec(metricsText)[1]);
    await page.setRequestInterception(true);
    const lengthen = (r) => {
      if (r.isInterceptResolutionHandled()) return;
      if (r.url().endsWith("/v1/chat/completions")) {
        const body = JSON.parse(r.postData());
        r.continue({ postData: JSON.stringify({ ...body, ignore_eos: true, max_tokens: 100000 }) });
      } else {
        r.continue();
      }
    };
    page.on("request", lengthen);
    await page.type("#prompt", "Tell me more");
    await page.click("#send");
    await page.waitForFunction(() => {
      const all = document.querySelectorAll(".msg.assistant > .body");
      return all.length === 2 && all[1].textContent.length > 20;
    }, { timeout: 60000 });
    assert.equal(await page.$eval("#stop", (b) => b.hidden), false);
    await page.click("#stop");
    await page.waitForFunction(() => !document.body.classList.contains("streaming"), { timeout: 10000 });
    const afterStop = await page.evaluate(() => JSON.parse(localStorage.getItem("nextn.conversations"))[0].messages);
    assert.equal(afterStop.length, 4);
    assert.equal(afterStop[3].stopped, true);
    assert.ok(afterStop[3].content.length > 0);
    let cancelled = cancelledBefore;
    for (let i = 0; i < 50 && cancelled === cancelledBefore; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const m = await (await fetch(url + "/metrics")).text();
      cancelled = Number(/^nextn:requests_cancelled_total (\S+)$/m.exec(m)[1]);
    }
    assert.equal(cancelled, cancelledBefore + 1, "the server did not cancel the stopped answer");
    page.off("request", lengthen);
    await page.setRequestInterception(false);

    // Reload: the conversation is still there, tints included, and no key is asked.
    await page.reload({ waitUntil: "load" });
    await page.waitForFunction(() => document.getElementById("model-name").textContent.includes("nextn-tiny"));
    assert.equal(await page.$("#key-dialog[open]"), null);
    const titles = await page.$$eval("#conversations .open", (b) => b.map((x) => x.textContent));
    assert.deepEqual(titles, [PROMPT]);
    const shown = await page.$$eval(".msg", (m) => m.map((x) => x.className));
    assert.deepEqual(shown, ["msg user tinted", "msg assistant tinted", "msg user tinted", "msg assistant tinted"]);
    assert.ok(await page.$$eval(".msg.assistant [class^=src-d]", (s) => s.length) > 0);
    assert.match(await page.$eval(".msg.assistant:last-of-type .note", (n) => n.textContent), /stopped/);

    // Settings by keyboard: open, set draft tokens off, Escape cancels, Save keeps.
    await page.click("#open-settings");
    await page.waitForSelector("#settings-dialog[open]");
    await page.keyboard.press("Escape");
    await page.waitForFunction(() => !document.getElementById("settings-dialog").open);

    // A phone-sized screen: nothing wider than the screen, the composer in view.
    await page.setViewport({ width: 390, height: 800, isMobile: true, hasTouch: true });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    const fit = await page.evaluate(() => ({
      scroll: document.documentElement.scrollWidth, width: window.innerWidth,
      composer: document.getElementById("composer").getBoundingClientRect().bottom <= window.innerHeight,
    }));
    assert.ok(fit.scroll <= fit.width, `sideways scrolling on a phone: ${fit.scroll} > ${fit.width}`);
    assert.ok(fit.composer, "composer out of view on a phone");
    await page.screenshot({ path: path.join(SHOTS, "chat-phone.png") });

    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    assert.equal(await stopServer(proc), 0);
  }
});

// A scripted answer (the page's request answered by the test, not the model) with what
// the tiny model does not write: reasoning, markdown with a code block, a tool call,
// and HTML that must stay text. Run in Chromium and, when installed, Firefox (WebDriver
// BiDi), where a real answer from the model must stream and be tinted too.
const SCRIPT_CONTENT = "Here is **code**:\n\n```python\nprint('<b>hi</b>')\n```\n\n<img src=x onerror=\"window.pwned=1\"> done.";
function scriptedStream() {
  const chunk = (delta, extra = {}) => "data: " + JSON.stringify({
    id: "chatcmpl-x", object: "chat.completion.chunk", created: 1, model: "nextn-tiny",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }] }) + "\n\n";
  const tokens = [];
  let out = chunk({ role: "assistant", content: "" });
  out += chunk({ reasoning_content: "Let me think." },
               { nextn: { tokens: [{ source: "target", position: 1, drafts: 0, reasoning: "Let me think." }] } });
  // The content in pieces of 5 characters, as drafts at positions 1, 2, then a bonus.
  for (let i = 0, n = 0; i < SCRIPT_CONTENT.length; i += 5, n++) {
    const piece = SCRIPT_CONTENT.slice(i, i + 5);
    const k = n % 3;
    const entry = k < 2 ? { source: "draft", position: k + 1, drafts: 2, content: piece }
                        : { source: "bonus", position: 3, drafts: 2, content: piece };
    tokens.push(entry);
    out += chunk({ content: piece }, { nextn: { tokens: [entry] } });
  }
  out += chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function",
                                function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] });
  out += chunk({}, { finish_reason: "tool_calls" });
  return out + "data: [DONE]\n\n";
}

async function launch(name) {
  if (name === "firefox") {
    return puppeteer.launch({ browser: "firefox", executablePath: FIREFOX, headless: true });
  }
  return puppeteer.launch({ executablePath: CHROMIUM, headless: true,
                            args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"] });
}

const FIREFOX = process.env.FIREFOX ?? "/usr/bin/firefox-esr";
mkdirSync(SHOTS, { recursive: true });
for (const name of ["chromium", "firefox"]) {
  const skip = name === "firefox" && !existsSync(FIREFOX) ? `no Firefox at ${FIREFOX}` : false;
  test(`reasoning, code, tool calls and HTML-looking text in ${name}`, { skip, timeout: 240000 }, async () => {
    // A fixed depth: with `auto` the planner may decode plain (it did under the sanitizers),
    // and the first answer must show drafts.
    const { proc, ready } = await startServer("webui", MODEL, 2, ["--mtp", "--num-mtp-tokens", "2", "--max-tokens", "60"]);
    const browser = await launch(name);
    const problems = [];
    try {
      const page = await browser.newPage();
      page.on("console", (m) => {
        if (m.type() === "error" || m.type() === "warn") problems.push(`console.${m.type()}: ${m.text()}`);
      });
      page.on("pageerror", (e) => problems.push("page error: " + e.message));
      await page.setViewport({ width: 1100, height: 800 });
      await page.goto(ready.url + "/", { waitUntil: "load" });
      await page.waitForFunction(() => document.getElementById("model-name").textContent.includes("nextn-tiny"));

      // A real answer first: it streams and is tinted in this browser too.
      await page.type("#prompt", PROMPT);
      await page.keyboard.press("Enter");
      await page.waitForSelector(".msg.assistant");
      await page.waitForFunction(() => !document.body.classList.contains("streaming"), { timeout: 60000 });
      const real = await page.evaluate(() => ({
        text: document.querySelector(".msg.assistant > .body").textContent,
        drafts: document.querySelectorAll(".msg.assistant [class^=src-d]").length }));
      assert.ok(real.text.length > 0 && real.drafts > 0, JSON.stringify(real));

      // Then the scripted one, in a new chat.
      await page.setRequestInterception(true);
      const script = (r) => {
        if (r.isInterceptResolutionHandled()) return;
        if (r.url().endsWith("/v1/chat/completions"))
          r.respond({ status: 200, contentType: "text/event-stream", body: scriptedStream() });
        else r.continue();
      };
      page.on("request", script);
      await page.click("#new-chat");
      await page.type("#prompt", "weather?");
      await page.keyboard.press("Enter");
      await page.waitForSelector(".msg.assistant .tool-call");
      await page.waitForFunction(() => !document.body.classList.contains("streaming"));
      const view = await page.evaluate(() => {
        const msg = document.querySelector(".msg.assistant");
        const think = msg.querySelector("details.think");
        return {
          thinkOpen: think.open, thinkHidden: think.hidden, summary: think.querySelector("summary").textContent,
          thinkText: think.querySelector(".body").textContent,
          strong: msg.querySelector(":scope > .body p strong")?.textContent,
          code: msg.querySelector(":scope > .body pre code")?.textContent,
          lang: msg.querySelector(":scope > .body pre code")?.dataset.lang,
          imgs: msg.querySelectorAll("img").length, pwned: window.pwned === 1,
          lastP: [...msg.querySelectorAll(":scope > .body p")].at(-1).textContent,
          tool: msg.querySelector(".tool-call .name").textContent,
          args: msg.querySelector(".tool-call pre").textContent,
          bonus: msg.querySelectorAll(".src-bonus").length, d1: msg.querySelectorAll(".src-d1").length,
        };
      });
      assert.deepEqual(view, {
        thinkOpen: false, thinkHidden: false, summary: "Reasoning (13 characters)", thinkText: "Let me think.",
        strong: "code", code: "print('<b>hi</b>')", lang: "python", imgs: 0, pwned: false,
        lastP: '<img src=x onerror="window.pwned=1"> done.', tool: "get_weather", args: '{\n  "city": "Oslo"\n}',
        bonus: view.bonus, d1: view.d1,
      });
      assert.ok(view.bonus > 0 && view.d1 > 0);
      // The folded reasoning opens from the keyboard.
      await page.focus(".msg.assistant details.think summary");
      await page.keyboard.press("Enter");
      assert.equal(await page.$eval(".msg.assistant details.think", (d) => d.open), true);
      if (name === "chromium") {
        await page.screenshot({ path: path.join(SHOTS, "chat-scripted.png") });
        // The code block's copy button puts the code on the clipboard.
        await browser.defaultBrowserContext().overridePermissions(ready.url, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
        await page.click(".msg.assistant pre .copy-code");
        await page.waitForFunction(() => document.querySelector(".msg.assistant pre .copy-code").textContent === "Copied");
        assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "print('<b>hi</b>')");
      }
      page.off("request", script);
      await page.setRequestInterception(false);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      assert.equal(await stopServer(proc), 0);
    }
  });
}
