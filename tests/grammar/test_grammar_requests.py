"""tests/grammar/test_grammar_requests.py — the structured-output request fields of the
server on the tiny model: llama.cpp's documented GBNF examples through `grammar` (outputs
checked with Python's re and json, not with nextn's matcher), json_object mode, a required
and a named tool call parsed into tool_calls with arguments valid under the tool's schema
(jsonschema), pydantic-style tool parameters ($defs and #/$defs references), streaming,
and the 400s: unsupported schema keywords named with their JSON pointer, bad regexes,
GBNF errors with line:column, conflicting fields, grammars that match no string, and the
limits hostile grammars meet (deep $ref chains, nested optional repetitions, ambiguity
that grows while generating), each named with its flag.
"""
import json
import os
import re
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
from serverlib import SRC, Server, check, stream_text  # noqa: E402

TINY = os.path.join(SRC, "models", "nextn-tiny")


def gbnf(name):
    with open(os.path.join(HERE, "data", name)) as f:
        return f.read()


# Independent descriptions of the example languages: a regex for lists, a small
# recursive-descent recognizer for arithmetic (written from the grammar's text).
LIST = re.compile("^(- [^\r\n\x0b\x0c\x85\u2028\u2029]+\n)+$")
WS = re.compile(r"[ \t\n]*")


def arithmetic_prefix_ok(text):
    """Whether text is a prefix of (expr "=" ws term "\n")+: parse as far as it goes."""
    pos = 0

    def ws(p):
        return WS.match(text, p).end()

    def term(p):
        if p >= len(text):
            return None  # the prefix ended inside: fine
        m = re.compile(r"[a-z][a-z0-9_]*|[0-9]+").match(text, p)
        if m:
            return ws(m.end())
        if text[p] == "(":
            q = expr(ws(p + 1))
            if q is None or q >= len(text):
                return None
            if text[q] != ")":
                raise ValueError(f"')' expected at {q}")
            return ws(q + 1)
        raise ValueError(f"term expected at {p}")

    def expr(p):
        p = term(p)
        while p is not None and p < len(text) and text[p] in "-+*/":
            p = term(p + 1)
        return p

    try:
        while pos < len(text):
            p = expr(pos)
            if p is None or p >= len(text):
                return True
            if text[p] != "=":
                return False
            p = term(ws(p + 1))
            if p is None or p >= len(text):
                return True
            if text[p - 1] != "\n" and text[p] != "\n":
                return False
            pos = p if text[p - 1] == "\n" else p + 1
        return True
    except ValueError:
        return False


def complete(srv, body, path="/v1/completions"):
    status, out = srv.post(path, body, timeout=300)
    check(status == 200, f"HTTP {status}: {out}")
    c = out["choices"][0]
    return c, (c["message"]["content"] if "message" in c else c["text"])


def expect_400(srv, body, param_part, message_part, path="/v1/chat/completions"):
    status, out = srv.post(path, body)
    check(status == 400, f"expected 400 for {json.dumps(body)[:200]}, got {status} {out}")
    err = out["error"]
    check(message_part in err["message"], f"message {err['message']!r} lacks {message_part!r}")
    check(param_part in (err.get("param") or ""), f"param {err.get('param')!r} lacks {param_part!r}")


def main():
    msgs = [{"role": "user", "content": "Give me data."}]
    with Server("--mtp", model=TINY) as srv:
        # llama.cpp's GBNF examples.
        for seed in range(3):
            c, text = complete(srv, {"prompt": "Tasks:\n", "grammar": gbnf("list.gbnf"), "max_tokens": 60,
                                     "temperature": 1.0, "seed": seed})
            if c["finish_reason"] == "stop":
                check(LIST.match(text), f"list grammar output {text!r}")
            else:
                check(text.startswith("- "), f"list grammar output {text!r}")
            c, text = complete(srv, {"prompt": "{", "grammar": gbnf("json.gbnf"), "max_tokens": 120,
                                     "temperature": 1.0, "seed": seed})
            if c["finish_reason"] == "stop":
                check(isinstance(json.loads(text), dict), f"json grammar output {text!r}")
            c, text = complete(srv, {"prompt": "x = ", "grammar": gbnf("arithmetic.gbnf"), "max_tokens": 40,
                                     "temperature": 1.0, "seed": seed})
            check(arithmetic_prefix_ok(text), f"arithmetic output {text!r}")

        # json_object: any JSON object.
        for t in (0.0, 1.0):
            c, text = complete(srv, {"messages": msgs, "response_format": {"type": "json_object"}, "max_tokens": 200,
                                     "temperature": t, "seed": 3}, "/v1/chat/completions")
            if c["finish_reason"] == "stop":
                check(isinstance(json.loads(text), dict), f"json_object output {text!r}")

        # Streaming gives the same text as the whole response.
        body = {"prompt": "Colour: ", "json_schema": {"enum": ["red", "green", "blue"]}, "max_tokens": 20}
        _, whole = complete(srv, body)
        streamed = stream_text(srv.stream("/v1/completions", dict(body, stream=True)))
        check(streamed == whole and json.loads(whole) in ["red", "green", "blue"], f"{streamed!r} vs {whole!r}")

        # Tool calls: required and named, parsed into tool_calls, arguments valid.
        params = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                   "unit": {"enum": ["C", "F"]}},
                  "required": ["city", "unit"], "additionalProperties": False}
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}},
                 {"type": "function", "function": {"name": "get_time", "parameters": {
                     "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}]
        for choice, names in (("required", {"get_weather", "get_time"}),
                              ({"type": "function", "function": {"name": "get_time"}}, {"get_time"})):
            for seed in range(3):
                status, out = srv.post("/v1/chat/completions", {"messages": msgs, "tools": tools, "tool_choice": choice,
                                                                "max_tokens": 120, "temperature": 1.0, "seed": seed})
                check(status == 200, f"{status} {out}")
                ch = out["choices"][0]
                if ch["finish_reason"] == "length":
                    continue
                calls = ch["message"].get("tool_calls") or []
                check(ch["finish_reason"] == "tool_calls" and len(calls) == 1, f"tool call expected: {ch}")
                fn = calls[0]["function"]
                check(fn["name"] in names, f"tool {fn['name']}")
                schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == fn["name"])
                jsonschema.validate(json.loads(fn["arguments"]), schema)

        # 400s naming the problem and where it is.
        bad_schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
        expect_400(srv, {"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": bad_schema}}}, "/properties/tags/uniqueItems", "uniqueItems")
        expect_400(srv, {"prompt": "a", "json_schema": {"type": "string", "pattern": "(?<=a)b"}}, "json_schema/pattern",
                   "offset", "/v1/completions")
        expect_400(srv, {"prompt": "a", "json_schema": {"type": "string", "format": "ipv4"}}, "json_schema/format",
                   "ipv4", "/v1/completions")
        expect_400(srv, {"prompt": "a", "grammar": "root ::= item\nitem ::= \"x\" missing\n"}, "grammar",
                   "2:14: undefined rule 'missing'", "/v1/completions")
        expect_400(srv, {"prompt": "a", "grammar": "root ::= [a-z\n"}, "grammar", "1:10: unterminated", "/v1/completions")
        expect_400(srv, {"prompt": "a", "grammar": "root ::= \"a\"", "json_schema": {"type": "null"}}, "grammar",
                   "cannot be combined", "/v1/completions")
        expect_400(srv, {"messages": msgs, "response_format": {"type": "xml"}}, "response_format.type", "xml")
        expect_400(srv, {"messages": msgs, "tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", "contentEncoding": "base64"}}}}}],
            "tool_choice": "required"}, "tools[0].function.parameters/properties/a/contentEncoding", "contentEncoding")

        # Hostile grammars: each was a crash, a hang or a quiet wrong answer; now a 400 that
        # names the limit and its flag, at once, and the server goes on serving.
        chain = {"$ref": "#/$defs/d0", "$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(10000)}}
        chain["$defs"]["d10000"] = {"type": "string"}
        expect_400(srv, {"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": chain}}}, "response_format", "--schema-max-depth")
        for grammar in ('root ::= (("a"?){100}){1000}', 'root ::= ("a"?){10000}'):
            expect_400(srv, {"prompt": "a", "grammar": grammar}, "grammar", "--grammar-max-stacks", "/v1/completions")
        # Ambiguity that grows with the output: found while generating, still a 400 (or,
        # streamed, an error event with the same code).
        stars = {"prompt": "*" * 50, "grammar": 'root ::= s\ns ::= "*" s "a" | "*" s "b" | "*"', "max_tokens": 64}
        expect_400(srv, stars, "", "--grammar-max-stacks", "/v1/completions")
        expect_400(srv, {"prompt": "a", "json_schema": {"type": "string", "pattern": "((a?){100}){1000}"},
                         "max_tokens": 8}, "", "--grammar-max-stacks", "/v1/completions")
        events = srv.stream("/v1/completions", dict(stars, stream=True))
        codes = [e.get("error", {}).get("code") for e in events if isinstance(e, dict)]
        check("grammar_limit" in codes, f"no grammar_limit error event: {events[-3:]}")
        # Grammars that match no string are refused when compiled.
        for grammar, what in (('root ::= "\\uD800"', "surrogate"), ("root ::= [\\uD800-\\uDFFF]", "matches no string"),
                              ("root ::= [^\\x00-\\U0010FFFF]", "matches no string"),
                              ('root ::= "\\UFFFFFFFF"', "U+10FFFF")):
            expect_400(srv, {"prompt": "a", "grammar": grammar}, "grammar", what, "/v1/completions")
        expect_400(srv, {"prompt": "a", "json_schema": {"$ref": ""}}, "json_schema/$ref", "$ref", "/v1/completions")
        status, health = srv.get("/health")
        check(status == 200, f"server unwell after hostile grammars: {status} {health}")

        # Pydantic-style parameters ($defs beside the schema, "#/$defs/..." references) work.
        address = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}
        pyd = {"$defs": {"Address": address}, "type": "object",
               "properties": {"home": {"$ref": "#/$defs/Address"}}, "required": ["home"]}
        for tools in ([{"type": "function", "function": {"name": "move", "parameters": pyd}}],
                      [{"type": "function", "function": {"name": "move", "parameters": pyd}},
                       {"type": "function", "function": {"name": "stay", "parameters": pyd}}]):
            status, out = srv.post("/v1/chat/completions", {"messages": msgs, "tools": tools, "tool_choice": "required",
                                                            "max_tokens": 120, "temperature": 1.0, "seed": 1})
            check(status == 200, f"pydantic-style tool parameters refused: {status} {out}")
            ch = out["choices"][0]
            if ch["finish_reason"] == "tool_calls":
                jsonschema.validate(json.loads(ch["message"]["tool_calls"][0]["function"]["arguments"]), pyd)
    print("ok")


if __name__ == "__main__":
    main()
