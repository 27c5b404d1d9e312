// tests/tokenizer/differential.test.mjs — nextn's tokenizer against transformers.js
// (@lenml/tokenizers) on the four real tokenizers and the >= 5 MB corpus:
//   encode ids identical on 100 % of lines; decode == reference decode == expected round
//   trip text; streaming decode == one-shot decode; add_special_tokens behaviour.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { MODELS, TMP, corpusPath, lineText, loadReference, modelDir, readJsonl, runNextn } from "./common.mjs";

const corpus = corpusPath();
const lines = readJsonl(corpus);

// What decode(encode(text)) must give back: the normalized text (Qwen3 applies NFC;
// Gemma's normalizer maps " " to "▁" and its decoder maps every "▁" back to " ").
function expectedRoundTrip(name, text) {
  if (name === "qwen3") return text.normalize("NFC");
  if (name === "gemma3") return text.replaceAll("\u2581", " ");
  return text;
}

for (const name of MODELS) {
  test(`${name}: encode/decode/stream identical to the reference on the corpus`, async () => {
    const ref = await loadReference(name);
    const out = path.join(TMP, `tokenizer-${name}.out.jsonl`);
    fs.writeFileSync(out, runNextn(["tokenize", "--model", modelDir(name), "--no-special", "--batch", corpus]));
    const ours = readJsonl(out);
    assert.equal(ours.length, lines.length);
    let bytes = 0, tokens = 0;
    const failures = [];
    for (let i = 0; i < lines.length; ++i) {
      const text = lineText(lines[i]);
      bytes += Buffer.byteLength(text);
      const want = ref.encode(text, { add_special_tokens: false });
      const got = ours[i];
      tokens += want.length;
      if (JSON.stringify(want) !== JSON.stringify(got.ids)) {
        let k = 0;
        while (k < want.length && want[k] === got.ids[k]) ++k;
        failures.push(`${lines[i].src}: ids differ at token ${k}: want ${want.slice(k, k + 5)} got ${got.ids.slice(k, k + 5)}`);
        continue;
      }
      const refDecode = want.length ? ref.decode(want, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
      if (got.decode !== refDecode) failures.push(`${lines[i].src}: decode differs from the reference`);
      else if (got.decode !== expectedRoundTrip(name, text)) failures.push(`${lines[i].src}: round trip differs`);
      else if (got.stream !== got.decode) failures.push(`${lines[i].src}: streaming decode differs from one-shot`);
    }
    console.log(`${name}: ${lines.length} lines, ${(bytes / 1e6).toFixed(2)} MB, ${tokens} tokens, ${failures.length} failures`);
    assert.deepEqual(failures.slice(0, 20), []);
  });

  test(`${name}: add_special_tokens=true`, async () => {
    const ref = await loadReference(name);
    const sample = lines.filter((l) => l.src.startsWith("edge:special")).slice(0, 20);
    const file = path.join(TMP, `tokenizer-${name}.special.jsonl`);
    fs.writeFileSync(file, sample.map((l) => JSON.stringify(l)).join("\n") + "\n");
    const outFile = path.join(TMP, `tokenizer-${name}.special.out.jsonl`);
    fs.writeFileSync(outFile, runNextn(["tokenize", "--model", modelDir(name), "--batch", file]));
    const ours = readJsonl(outFile);
    for (let i = 0; i < sample.length; ++i) {
      let want = ref.encode(lineText(sample[i]), { add_special_tokens: true });
      // transformers.js ignores tokenizer_config.json's add_bos_token; transformers' fast
      // Llama tokenizer (DeepSeek-V3's class) honours it and prepends BOS.
      if (name === "deepseek_v3") want = [0, ...want];
      assert.deepEqual(ours[i].ids, want, sample[i].src);
    }
  });
}
