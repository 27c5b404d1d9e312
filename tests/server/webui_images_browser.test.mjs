// tests/server/webui_images_browser.test.mjs — images on the chat page, in Debian's headless
// Chromium driven by puppeteer-core.
// With a random tiny Qwen3.5 vision-language checkpoint (the one test_image_answers.py
// makes): two PNGs through the file input, one pasted into the message box and one dropped on
// the page show as thumbnails; a dropped text file is refused with a message; one thumbnail is
// removed; Send: the request the page sent carries the text and the three images as image_url
// parts, the answer arrives, and it is the API's answer to that request, whose prompt is
// 3 × 72 tokens longer than the same text alone (the images reached the model). The next
// turn resends the images; a corrupt PNG is refused by the server with its 400 shown in the
// page, and left out of later turns; thumbnails open large and survive a reload.
// With a text-only model the attach button is disabled and a pasted or dropped image is
// refused with a visible message.
import test from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { deflateSync } from "node:zlib";
import { startServer, stopServer, TMP } from "./serve.mjs";

const SRC = process.env.NEXTN_SOURCE_DIR ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const BUILD = process.env.NEXTN_BUILD_DIR ?? path.join(SRC, "build");
const SHOTS = path.join(BUILD, "test-artifacts", "webui");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const require = createRequire(path.join(SRC, "tests/package.json"));
const puppeteer = require("puppeteer-core");

// The checkpoint test_image_answers.py serves (made once by serverlib.checkpoint, shared).
function visionCheckpoint() {
  const script = "import sys; sys.path.insert(0, sys.argv[1]); from serverlib import checkpoint; " +
                 "print(checkpoint('server-qwen3_5-vl', '--arch', 'qwen3_5', '--vision-language', '--seed', '7'))";
  return execFileSync("/usr/bin/python3", ["-c", script, path.join(SRC, "tests/server")], { encoding: "utf8" }).trim();
}

// An 8-bit RGB PNG with a pattern that depends on `seed` (zlib here, CRC-32 by hand).
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function pngChunk(kind, data) {
  const body = Buffer.concat([Buffer.from(kind, "latin1"), data]);
  const len = Buffer.alloc(4), crc = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}
function png(width, height, seed) {
  const rows = [];
  for (let y = 0; y < height; y++) {
    rows.push(0);  // filter: none
    for (let x = 0; x < width; x++) for (let c = 0; c < 3; c++) rows.push((x * 13 + y * 29 + c * 71 + seed * 97) % 256);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);  // 8-bit RGB
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk("IHDR", ihdr),
                        pngChunk("IDAT", deflateSync(Buffer.from(rows))), pngChunk("IEND", Buffer.alloc(0))]);
}
const dataUrl = (bytes) => "data:image/png;base64," + bytes.toString("base64");
// 40×30 px: 72 prompt tokens with this checkpoint's processor (test_image_answers.py).
const IMAGE_TOKENS = 72;

async function launch() {
  return puppeteer.launch({ executablePath: CHROMIUM, headless: true,
                            args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"] });
}

// Console errors and warnings, page errors: none expected, except the one line Chromium
// logs for the 400 the test asks for.
function watch(page) {
  const problems = [];
  page.on("console", (m) => {
    if (/status of 400/.test(m.text())) return;
    if (m.type() === "error" || m.type() === "warn") problems.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  return problems;
}

// A synthetic paste (into the message box) or drop (on `target`) of one file, as the browser
// makes them: a DataTransfer holding a File.
function transfer(page, kind, target, name, type, bytes) {
  return page.evaluate((kind, target, name, type, b64) => {
    const data = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([data], name, { type }));
    const el = document.querySelector(target);
    if (kind === "paste") {
      el.dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
    } else {
      el.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
      el.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    }
  }, kind, target, name, type, Buffer.from(bytes).toString("base64"));
}

const thumbNames = (page) => page.$$eval("#attachments .thumb img", (imgs) => imgs.map((i) => i.alt));
const stored = (page) => page.evaluate(() => JSON.parse(localStorage.getItem("nextn.conversations"))[0].messages);

async function sendAndWait(page, text, answers) {
  await page.type("#prompt", text);
  await page.keyboard.press("Enter");
  await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant").length === n, {}, answers);
  await page.waitForFunction(() => !document.body.classList.contains("streaming"), { timeout: 120000 });
}

async function chat(url, body) {
  const res = await fetch(url + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: false }) });
  const j = await res.json();
  assert.equal(res.status, 200, JSON.stringify(j));
  return j;
}

test("images on the chat page with a vision-language model", { timeout: 600000 }, async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: scripts/setup.sh --tests installs it`);
  mkdirSync(SHOTS, { recursive: true });
  mkdirSync(TMP, { recursive: true });
  const dir = mkdtempSync(path.join(TMP, "webui-images-"));
  const files = {};
  for (const [name, seed] of [["a.png", 1], ["b.png", 2], ["c.png", 3], ["d.png", 4]]) {
    files[name] = png(40, 30, seed);
    writeFileSync(path.join(dir, name), files[name]);
  }
  // A PNG whose pixel data is cut short: the browser takes it, the server refuses it.
  writeFileSync(path.join(dir, "broken.png"), files["a.png"].subarray(0, files["a.png"].length - 30));

  const model = visionCheckpoint();
  const { proc, ready } = await startServer("webui-images", model, 2, ["--ctx-size", "2048", "--max-tokens", "12"]);
  const url = ready.url;
  const browser = await launch();
  try {
    const models = await (await fetch(url + "/v1/models")).json();
    assert.equal(models.data[0].meta.vision, true);
    const page = await browser.newPage();
    const problems = watch(page);
    // Every chat request the page makes, as sent.
    const sent = [];
    await page.setRequestInterception(true);
    page.on("request", (r) => {
      if (r.url().endsWith("/v1/chat/completions")) sent.push(JSON.parse(r.postData()));
      r.continue();
    });
    await page.setViewport({ width: 1280, height: 860 });
    await page.goto(url + "/", { waitUntil: "load" });
    await page.waitForFunction(() => !document.getElementById("attach").disabled);

    // Two through the file input, one pasted, one dropped; a text file is refused.
    const input = await page.$("#file-input");
    await input.uploadFile(path.join(dir, "a.png"), path.join(dir, "b.png"));
    await page.waitForFunction(() => document.querySelectorAll("#attachments .thumb").length === 2);
    await transfer(page, "paste", "#prompt", "c.png", "image/png", files["c.png"]);
    await page.waitForFunction(() => document.querySelectorAll("#attachments .thumb").length === 3);
    await transfer(page, "drop", "#messages", "d.png", "image/png", files["d.png"]);
    await page.waitForFunction(() => document.querySelectorAll("#attachments .thumb").length === 4);
    assert.deepEqual(await thumbNames(page), ["a.png", "b.png", "c.png", "d.png"]);
    await transfer(page, "drop", "#messages", "notes.txt", "text/plain", Buffer.from("hello"));
    await page.waitForSelector("#attach-note:not([hidden])");
    assert.match(await page.$eval("#attach-note", (n) => n.textContent), /notes\.txt: not a PNG, JPEG, WebP or GIF image/);
    assert.equal((await thumbNames(page)).length, 4);
    // One removed before sending.
    await page.click('#attachments button[aria-label="Remove b.png"]');
    await page.waitForFunction(() => document.querySelectorAll("#attachments .thumb").length === 3);
    assert.deepEqual(await thumbNames(page), ["a.png", "c.png", "d.png"]);
    await page.screenshot({ path: path.join(SHOTS, "chat-images-pending.png") });

    const QUESTION = "What is in these pictures?";
    await sendAndWait(page, QUESTION, 1);
    const urls = ["a.png", "c.png", "d.png"].map((n) => dataUrl(files[n]));
    const imageParts = urls.map((u) => ({ type: "image_url", image_url: { url: u } }));
    // The request: the text, then the images as image_url parts.
    assert.equal(sent.length, 1);
    assert.deepEqual(sent[0].messages, [{ role: "user", content: [{ type: "text", text: QUESTION }, ...imageParts] }]);
    // The composer is empty again; the message shows its three images; an answer, no error.
    assert.equal(await page.$eval("#attachments", (b) => b.hidden), true);
    assert.equal(await page.$eval("#attach-note", (n) => n.hidden), true);
    assert.deepEqual(await page.$$eval(".msg.user .images img", (imgs) => imgs.map((i) => i.src)), urls);
    let messages = await stored(page);
    const answer = messages[1];
    assert.ok(!answer.error, answer.error);
    assert.ok(answer.content.length > 0, "empty answer");
    assert.equal(await page.$(".msg .error"), null);
    // The images reached the model: the same request through the API gives the page's answer
    // (greedy, the server's default), and its prompt is the text's plus 72 tokens per image.
    const direct = await chat(url, sent[0]);
    assert.equal(direct.choices[0].message.content, answer.content);
    const textOnly = await chat(url, { messages: [{ role: "user", content: QUESTION }] });
    assert.equal(direct.usage.prompt_tokens, textOnly.usage.prompt_tokens + 3 * IMAGE_TOKENS);
    await page.screenshot({ path: path.join(SHOTS, "chat-images.png") });

    // The next turn resends the images (they are part of the conversation).
    await sendAndWait(page, "And the colours?", 2);
    assert.equal(sent.length, 2);
    assert.deepEqual(sent[1].messages[0], sent[0].messages[0]);
    assert.deepEqual(sent[1].messages.slice(1).map((m) => m.role), ["assistant", "user"]);
    assert.equal(sent[1].messages[2].content, "And the colours?");
    messages = await stored(page);
    assert.ok(messages[3].content.length > 0 && !messages[3].error, JSON.stringify(messages[3]));

    // A corrupt PNG: the server's 400 is shown in the page, and the refused message is not
    // sent again with the next turn.
    await input.uploadFile(path.join(dir, "broken.png"));
    await page.waitForFunction(() => document.querySelectorAll("#attachments .thumb").length === 1);
    await sendAndWait(page, "And this one?", 3);
    const shown = await page.$eval(".msg.assistant:last-of-type .error", (e) => e.textContent);
    assert.match(shown, /^messages\[4\]\.content\[1\]\.image_url\.url: .*PNG/);
    assert.match(await page.$eval(".msg.user:nth-last-of-type(2) .note", (n) => n.textContent), /refused/);
    messages = await stored(page);
    assert.equal(messages[4].refused, true);
    assert.equal(messages[5].error, shown);
    await sendAndWait(page, "Tell me more", 4);
    assert.equal(sent.length, 4);
    assert.deepEqual(sent[3].messages.map((m) => m.role), ["user", "assistant", "user", "assistant", "user"]);
    assert.equal(sent[3].messages[4].content, "Tell me more");
    messages = await stored(page);
    assert.ok(messages[7].content.length > 0 && !messages[7].error, JSON.stringify(messages[7]));

    // A thumbnail opens the picture large; a click closes it.
    await page.click(".msg.user .images .thumb");
    await page.waitForSelector("#image-dialog[open]");
    assert.equal(await page.$eval("#image-large", (i) => i.src), urls[0]);
    await page.click("#image-large");
    await page.waitForFunction(() => !document.getElementById("image-dialog").open);

    // After a reload the images are still in the conversation.
    await page.reload({ waitUntil: "load" });
    await page.waitForFunction(() => document.querySelectorAll(".msg.user .images img").length === 4);
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    assert.equal(await stopServer(proc), 0);
  }
});

test("images on the chat page with a text-only model", { timeout: 240000 }, async () => {
  const { proc, ready } = await startServer("webui-images-text", path.join(SRC, "models", "nextn-tiny"), 2, []);
  const browser = await launch();
  try {
    const models = await (await fetch(ready.url + "/v1/models")).json();
    assert.equal(models.data[0].meta.vision, false);
    const page = await browser.newPage();
    const problems = watch(page);
    await page.goto(ready.url + "/", { waitUntil: "load" });
    await page.waitForFunction(() => document.getElementById("model-name").textContent.includes("nextn-tiny"));
    assert.equal(await page.$eval("#attach", (b) => b.disabled), true);
    assert.match(await page.$eval("#attach", (b) => b.title), /does not take images/);
    const refused = async (kind, target) => {
      await transfer(page, kind, target, "a.png", "image/png", png(40, 30, 1));
      await page.waitForSelector("#attach-note:not([hidden])");
      assert.match(await page.$eval("#attach-note", (n) => n.textContent), /nextn-tiny does not take images/);
      assert.equal(await page.$eval("#attachments", (b) => b.hidden), true);
    };
    await refused("paste", "#prompt");
    // Text still goes out (and sending clears the note).
    await sendAndWait(page, "Hello", 1);
    assert.equal(await page.$eval("#attach-note", (n) => n.hidden), true);
    const [user, answer] = await stored(page);
    assert.deepEqual(user, { role: "user", content: "Hello" });
    assert.ok(answer.content.length > 0 && !answer.error, JSON.stringify(answer));
    await refused("drop", "#messages");
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    assert.equal(await stopServer(proc), 0);
  }
});
