// tests/grammar/openai_structured.test.mjs — structured output through the official
// `openai` npm SDK: chat.completions.parse with zodResponseFormat (a zod schema, as the
// SDK's docs show) and with a plain JSON Schema, a required tool call parsed by the SDK,
// and a bad schema surfacing as the SDK's BadRequestError naming the keyword. Outputs are
// checked by zod itself (the SDK's parse) — not by nextn's own grammar code.
import { createRequire } from "node:module";
import path from "node:path";
import assert from "node:assert/strict";
import { startServer, stopServer } from "../server/serve.mjs";

const SRC = process.env.NEXTN_SOURCE_DIR ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const require = createRequire(path.join(SRC, "tests/package.json"));
const { default: OpenAI, BadRequestError } = require("openai");
const { LengthFinishReasonError } = require("openai/core/error");
const { zodResponseFormat } = require("openai/helpers/zod");
const { z } = require("zod");

const { proc, ready } = await startServer("structured", path.join(SRC, "models/nextn-tiny"), 1, ["--mtp"]);
try {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${ready.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 300000 });
  const messages = [{ role: "user", content: "Describe a city as JSON." }];

  // zod: the SDK turns the schema into response_format and parses the answer with zod.
  const City = z.object({
    name: z.string().max(12),
    population: z.number().int().min(0).max(99999),
    kind: z.enum(["town", "city", "village"]),
    coastal: z.boolean(),
  });
  let finished = 0;
  for (const seed of [1, 2, 3, 4]) {
    let r;
    try {
      r = await client.chat.completions.parse({ model: ready.model, messages, seed, temperature: 1,
                                                max_tokens: 200, response_format: zodResponseFormat(City, "city") });
    } catch (e) {
      if (e instanceof LengthFinishReasonError) continue;  // cut by max_tokens: a valid prefix, not a value
      throw e;
    }
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, "stop");
    finished += 1;
    assert.deepEqual(City.parse(choice.message.parsed), choice.message.parsed);
  }
  assert.ok(finished >= 2, `only ${finished} of 4 answers finished`);

  // A plain JSON Schema through response_format.
  const r2 = await client.chat.completions.create({
    model: ready.model, messages, max_tokens: 60,
    response_format: { type: "json_schema", json_schema: { name: "flag", strict: true, schema: {
      type: "object", properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 1, maximum: 3 } },
      required: ["ok", "n"], additionalProperties: false } } },
  });
  const v = JSON.parse(r2.choices[0].message.content);
  assert.equal(typeof v.ok, "boolean");
  assert.ok(Number.isInteger(v.n) && v.n >= 1 && v.n <= 3);

  // A required tool call: the SDK sees tool_calls with arguments valid under the tool's zod schema.
  const Args = z.object({ city: z.string().max(10), unit: z.enum(["C", "F"]) }).strict();
  const tools = [{ type: "function", function: { name: "get_weather", parameters: {
    type: "object", properties: { city: { type: "string", maxLength: 10 }, unit: { enum: ["C", "F"] } },
    required: ["city", "unit"], additionalProperties: false } } }];
  let calls = 0;
  for (const seed of [1, 2, 3, 4]) {
    const r3 = await client.chat.completions.create({ model: ready.model, messages, tools, tool_choice: "required",
                                                      max_tokens: 120, temperature: seed === 1 ? 0 : 1, seed });
    const c3 = r3.choices[0];
    if (c3.finish_reason === "length") continue;
    assert.equal(c3.finish_reason, "tool_calls", JSON.stringify(c3));
    assert.equal(c3.message.tool_calls[0].function.name, "get_weather");
    Args.parse(JSON.parse(c3.message.tool_calls[0].function.arguments));
    calls += 1;
  }
  assert.ok(calls >= 2, `only ${calls} of 4 tool calls finished`);

  // A schema keyword nextn does not support is a 400 naming it.
  try {
    await client.chat.completions.create({ model: ready.model, messages, response_format: { type: "json_schema",
      json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "string", contentMediaType: "x" } } } } } });
    assert.fail("expected BadRequestError");
  } catch (e) {
    assert.ok(e instanceof BadRequestError, `got ${e}`);
    assert.match(e.message, /contentMediaType/);
    assert.match(e.message, /\/properties\/a\/contentMediaType/);
  }
  console.log("ok");
} finally {
  await stopServer(proc);
}
