"""tests/model/png_image.py — an 8-bit RGB PNG from a numpy array, written with the
standard library only (zlib, struct), for the image tests' inputs."""
import struct
import zlib


def png_bytes(rgb):
    """An 8-bit RGB PNG of rgb (uint8 [h, w, 3]), filter 0 on every row."""
    h, w, _ = rgb.shape

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
