// tests/server/openai_sdk.test.mjs — `nextn serve` driven by the official `openai` npm SDK:
// models.list, chat (plain and streamed with include_usage), legacy completions, and
// errors surfaced as the SDK's typed exceptions (BadRequestError 400,
// AuthenticationError 401, NotFoundError 404).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync, mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { TMP, startServer, stopServer } from "./serve.mjs";
import assert from "node:assert/strict";

const SRC = process.env.NEXTN_SOURCE_DIR ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const require = createRequire(path.join(SRC, "tests/package.json"));
const { default: OpenAI, APIError, BadRequestError, AuthenticationError, NotFoundError } = require("openai");

function checkpoint() {
  const out = path.join(TMP, "server-qwen3");
  if (existsSync(path.join(out, "config.json"))) return out;
  mkdirSync(TMP, { recursive: true });
  const work = mkdtempSync(path.join(TMP, "server-qwen3."));
  const r = spawnSync("/usr/bin/python3", [path.join(SRC, "tools/make_checkpoint.py"), "--arch", "qwen3", "--quiet",
                                           "--out", work], { stdio: "inherit" });
  assert.equal(r.status, 0, "make_checkpoint failed");
  try { renameSync(work, out); } catch { /* another test won */ }
  return out;
}


async function expectError(promise, Cls, status) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof Cls, `expected ${Cls.name}, got ${e?.constructor?.name}: ${e?.message}`);
    assert.ok(e instanceof APIError);
    assert.equal(e.status, status);
    assert.equal(typeof e.message, "string");
    assert.equal(typeof e.error?.message, "string", "the OpenAI error object reaches the SDK");
    return e;
  }
  assert.fail(`expected ${Cls.name}`);
}

const { proc, ready } = await startServer("sdk", checkpoint(), 1, ["--api-key", "test-key", "--parallel", "2", "--ctx-size", "512"]);
let exitCode;
try {
  const baseURL = `http://127.0.0.1:${ready.port}/v1`;
  const client = new OpenAI({ apiKey: "test-key", baseURL, maxRetries: 0, timeout: 120000 });

  const models = await client.models.list();
  const ids = models.data.map((m) => m.id);
  assert.deepEqual(ids, [ready.model]);
  const model = ids[0];

  const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Say hello." }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0,
                                                     ignore_eos: true });
  assert.equal(chat.object, "chat.completion");
  assert.equal(chat.choices[0].message.role, "assistant");
  assert.equal(chat.choices[0].finish_reason, "length");
  assert.equal(chat.usage.completion_tokens, 12);
  assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + 12);

  // Streaming with usage: same text as the non-streamed answer.
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0,
                                                       ignore_eos: true, stream: true,
                                                       stream_options: { include_usage: true } });
  let text = "";
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) {
      assert.deepEqual(chunk.choices, []);
      usage = chunk.usage;
      continue;
    }
    const c = chunk.choices[0];
    text += c.delta.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.ok(chunks >= 2);
  assert.equal(text, chat.choices[0].message.content);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 12);
  assert.equal(usage.prompt_tokens, chat.usage.prompt_tokens);

  // Legacy completions, plain and streamed.
  const comp = await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 8,
                                                 temperature: 0, ignore_eos: true });
  assert.equal(comp.object, "text_completion");
  assert.equal(comp.usage.completion_tokens, 8);
  const cstream = await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 8,
                                                    temperature: 0, ignore_eos: true, stream: true });
  let ctext = "";
  for await (const chunk of cstream) ctext += chunk.choices[0]?.text ?? "";
  assert.equal(ctext, comp.choices[0].text);

  // Typed errors.
  const bad = await expectError(client.chat.completions.create({ model, messages, n: 3 }), BadRequestError, 400);
  assert.equal(bad.param, "n");
  await expectError(client.chat.completions.create({ model, messages, temperature: "hot" }), BadRequestError, 400);
  await expectError(client.chat.completions.create({ model: "gpt-nonexistent", messages }), NotFoundError, 404);
  const wrong = new OpenAI({ apiKey: "wrong-key", baseURL, maxRetries: 0 });
  await expectError(wrong.chat.completions.create({ model, messages }), AuthenticationError, 401);
  await expectError(wrong.models.list(), AuthenticationError, 401);
} finally {
  exitCode = await stopServer(proc);
}
assert.equal(exitCode, 0, "server exit code after SIGTERM");
console.log("openai_sdk: ok");
