// tools/corpus/bench_tokenizer.mjs — encode throughput of nextn's tokenizer vs the
// transformers.js reference (@lenml/tokenizers) on the differential-test corpus, in the
// same run, plus tokenizer load times. Not a test: prints a table.
//   node tools/corpus/bench_tokenizer.mjs [--bin build/nextn] [--corpus FILE.jsonl] [--models qwen3,gemma3]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { MODELS, SOURCE_DIR, TMP, corpusPath, lineText, loadReference, modelDir, readJsonl } from "../../tests/tokenizer/common.mjs";

const args = process.argv.slice(2);
const opt = (name, def) => (args.includes(name) ? args[args.indexOf(name) + 1] : def);
const bin = opt("--bin", process.env.NEXTN_BIN ?? path.join(SOURCE_DIR, "build", "nextn"));
const corpus = args.includes("--corpus") ? opt("--corpus") : corpusPath();
const models = opt("--models", MODELS.join(",")).split(",");
const texts = readJsonl(corpus).map(lineText);
const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
console.log(`corpus: ${texts.length} lines, ${(bytes / 1e6).toFixed(2)} MB (${corpus})`);
console.log("model        | nextn load s | nextn MB/s | JS load s | JS MB/s | speedup");
for (const name of models) {
  const ours = JSON.parse(execFileSync(bin, ["tokenize", "--model", modelDir(name), "--batch", corpus, "--bench"], { encoding: "utf8" }));
  let t0 = performance.now();
  const ref = await loadReference(name);
  ref.encode("warm up", { add_special_tokens: false });
  const jsLoad = (performance.now() - t0) / 1000;
  t0 = performance.now();
  for (const t of texts) ref.encode(t, { add_special_tokens: false });
  const jsS = (performance.now() - t0) / 1000;
  const jsMBs = bytes / 1e6 / jsS;
  console.log(`${name.padEnd(12)} | ${ours.load_s.toFixed(3).padStart(12)} | ${ours.mb_per_s.toFixed(2).padStart(10)} | ${jsLoad.toFixed(3).padStart(9)} | ${jsMBs.toFixed(2).padStart(7)} | ${(ours.mb_per_s / jsMBs).toFixed(1)}x`);
}
