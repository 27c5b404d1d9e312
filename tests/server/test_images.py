#!/usr/bin/python3
"""tests/server/test_images.py — image_url content parts on /v1/chat/completions.

The checkpoint is text-only (test_image_answers.py serves one with a tower), so a request whose
images all decode is a 400 "has no vision encoder" naming the model and the checkpoint;
each bad image is a 400 naming the part and the problem instead: corrupt and truncated
files of every format, 0×0, 100000×1, a decompression bomb (an 8000×8000 PNG of zeros,
refused from its header before any pixel is allocated), an unknown media type, bytes that are no image, a non-base64
or malformed data: URL, a remote http(s) URL (not fetched), too many images; an image
larger than the body limit is a 413. Afterwards the server still answers a text request.

PNGs are written here with zlib + struct; the JPEG, WebP and GIF in tests/server/data/
are 16×12 pictures written once with libjpeg-turbo, libwebp and giflib (the encoders of
tests/vision/vision_test_util.h)."""
import base64
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, check  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
TEXT = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 8, "temperature": 0,
        "ignore_eos": True}


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width, height, raw=None, color_type=2):
    """A PNG with this IHDR; `raw` (the filtered rows) defaults to a pattern of the right size."""
    channels = {2: 3, 6: 4, 0: 1}[color_type]
    if raw is None:
        raw = b"".join(b"\x00" + bytes((x * 13 + y * 29 + c * 71) % 256 for x in range(width) for c in range(channels))
                       for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def data_url(data, media_type="image/png"):
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def fixture(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


def image_part(url):
    return {"type": "image_url", "image_url": {"url": url}}


def chat(*parts, more_messages=()):
    content = [{"type": "text", "text": "What is in this picture?"}, *parts]
    return {"messages": [*more_messages, {"role": "user", "content": content}], "max_tokens": 4}


def expect_error(s, body, status, fragments, param=None, code=None):
    st, resp = s.post("/v1/chat/completions", body)
    check(st == status and isinstance(resp, dict) and "error" in resp, f"{fragments}: status {st} {str(resp)[:300]}")
    msg = resp["error"]["message"]
    for f in fragments:
        check(f in msg, f"'{f}' not in: {msg}")
    if param is not None:
        check(resp["error"]["param"] == param, f"param {resp['error']['param']} != {param}: {msg}")
    if code is not None:
        check(resp["error"]["code"] == code, f"code {resp['error']['code']} != {code}: {msg}")
    return resp


def main():
    good = {
        "png": data_url(png(16, 12)),
        "png_rgba": data_url(png(10, 10, color_type=6)),
        "png_grey": data_url(png(12, 11, color_type=0)),
        "jpeg": data_url(fixture("image_16x12.jpg"), "image/jpeg"),
        "webp": data_url(fixture("image_16x12.webp"), "image/webp"),
        "gif": data_url(fixture("image_16x12.gif"), "image/gif"),
    }
    url = "messages[0].content[1].image_url.url"
    # A real decompression bomb: 192 MB of pixels in ~190 KB of PNG.
    bomb = png(8000, 8000, raw=bytes(8000 * (8000 * 3 + 1)))
    with Server("--ctx-size", "512", "--max-body-mb", "2") as s:
        st, before = s.post("/v1/chat/completions", TEXT)
        check(st == 200, f"text request before: {st} {before}")
        model_id, model_dir = s.ready.get("model", ""), s.model_dir
        # /v1/models says the model takes no images (the chat page hides its attach control).
        st, models = s.get("/v1/models")
        check(st == 200 and models["data"][0]["meta"]["vision"] is False, (st, models))

        # Every format decodes: the refusal is then about the model, naming it and the checkpoint.
        for name, u in good.items():
            resp = expect_error(s, chat(image_part(u)), 400, ["has no vision encoder", model_dir],
                                param="messages[0].content[1]", code="no_vision_encoder")
            check(model_id == "" or model_id in resp["error"]["message"], resp)
        # Several images per message and across turns (the first image names the part).
        turns = [{"role": "user", "content": [image_part(good["gif"]), {"type": "text", "text": "and this?"}]},
                 {"role": "assistant", "content": "A grid."}]
        expect_error(s, chat(image_part(good["png"]), image_part(good["jpeg"]), more_messages=turns), 400,
                     ["has no vision encoder"], param="messages[0].content[0]")
        # Also /apply-template (which would otherwise drop the image silently).
        st, resp = s.post("/apply-template", chat(image_part(good["webp"])))
        check(st == 400 and "no vision encoder" in resp["error"]["message"], (st, resp))
        # The Responses-style part: input_image with a string image_url.
        expect_error(s, chat({"type": "input_image", "image_url": good["png"]}), 400, ["has no vision encoder"])

        bad = [
            ("corrupt PNG", data_url(png(16, 12)[:40] + b"\x00" * 20 + png(16, 12)[60:]), ["PNG"]),
            ("truncated PNG", data_url(png(16, 12)[:-30]), ["PNG"]),
            ("truncated JPEG", data_url(fixture("image_16x12.jpg")[:-100], "image/jpeg"), ["JPEG", "truncated"]),
            ("corrupt JPEG", data_url(fixture("image_16x12.jpg")[:20] + b"\xff" * 40, "image/jpeg"), ["JPEG"]),
            ("truncated WebP", data_url(fixture("image_16x12.webp")[:30], "image/webp"), ["WebP"]),
            ("truncated GIF", data_url(fixture("image_16x12.gif")[:-40], "image/gif"), ["GIF"]),
            ("0x0", data_url(b"GIF89a\x00\x00\x00\x00\x00\x00\x00;"), ["no pixels (0×0)"]),
            ("100000x1", data_url(png(100000, 1, raw=b"\x00" * 16)), ["100000×1", "limited to 16384"]),
            ("huge canvas", data_url(png(20000, 20000, raw=b"\x00" * 1000)), ["20000×20000", "limited to 16384"]),
            ("bomb", data_url(bomb), ["8000×8000 = 64000000 pixels", "the limit is 33554432"]),
            ("aspect", data_url(png(3000, 10, raw=b"\x00" * 16)), ["aspect ratio of 300:1"]),
            ("unknown media type", data_url(png(16, 12), "image/bmp"), ["unsupported media type 'image/bmp'"]),
            ("svg", "data:image/svg+xml;base64," + base64.b64encode(b"<svg/>").decode(), ["unsupported media type"]),
            ("not an image", data_url(b"hello, world" * 4), ["not a PNG, JPEG, WebP or GIF"]),
            ("empty", "data:image/png;base64,", ["empty"]),
            ("not base64", "data:image/png,%89PNG", ["not base64"]),
            ("bad base64", "data:image/png;base64,iVBOR*w0K", ["invalid base64", "offset 5"]),
            ("no comma", "data:image/png;base64", ["no ','"]),
            ("file URL", "file:///etc/passwd", ["expected a data: URL"]),
        ]
        for desc, u, fragments in bad:
            resp = expect_error(s, chat(image_part(u)), 400, fragments, param=url)
            check(resp["error"]["message"].startswith(url), f"{desc}: {resp}")
        # The part index is the one of the bad image, after good ones.
        expect_error(s, chat(image_part(good["png"]), image_part(data_url(b"junk junk"))), 400, ["image 1"],
                     param="messages[0].content[2].image_url.url")
        for remote in ("https://example.com/cat.png", "HTTP://example.com/cat.png"):
            expect_error(s, chat(image_part(remote)), 400, ["not fetched", "data: URL"], param=url,
                         code="remote_image_url")
        expect_error(s, chat(*[image_part(good["png"])] * 17), 400, ["too many images: at most 16"],
                     param="messages[0].content[17]")
        expect_error(s, chat({"type": "image_url", "image_url": {"detail": "high"}}), 400, ["expected a string"],
                     param=url)
        expect_error(s, chat({"type": "image_url"}), 400, ["expected an object"],
                     param="messages[0].content[1].image_url")
        expect_error(s, chat({"type": "input_audio", "input_audio": {"data": ""}}), 400, ["not supported"],
                     param="messages[0].content[1].type")
        # Larger than the body limit (2 MB here): the HTTP layer's 413.
        big = data_url(os.urandom(3 << 20))
        st, resp = s.post("/v1/chat/completions", chat(image_part(big)))
        check(st == 413 and resp["error"]["code"] == "payload_too_large", (st, str(resp)[:200]))

        st, after = s.post("/v1/chat/completions", TEXT)
        check(st == 200, f"text request after: {st} {after}")
        check(after["choices"][0]["message"]["content"] == before["choices"][0]["message"]["content"],
              "the text answer changed after the image requests")
        check(s.proc.poll() is None, "server exited")
    print("test_images: ok")


if __name__ == "__main__":
    main()
