"""Tiny valid images for upload tests (no imaging library needed)."""
import struct
import zlib


def png_bytes(seed: int = 0, size: int = 2) -> bytes:
    """A size x size RGB PNG whose pixel colour depends on seed (so digests differ per seed)."""
    r, g, b = seed & 0xFF, (seed >> 8) & 0xFF, (seed >> 16) & 0xFF
    raw = b"".join(b"\x00" + bytes((r, g, b)) * size for _ in range(size))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
