"""Broken files with a ``.jpg`` name, for the dirty split.

Every kind is checked to fail ``Image.open(f).convert("RGB")`` with Pillow's
default settings (``ImageFile.LOAD_TRUNCATED_IMAGES`` off), so a loader that
does not guard against bad files really does crash on them.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

KINDS: tuple[str, ...] = ("truncated", "empty", "not_jpeg", "bad_header")
"""Broken-file kinds, in the rotation the dirty split uses; also the manifest ``status``."""


def fails_to_decode(data: bytes) -> bool:
    """True if Pillow cannot open and fully decode ``data``."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.convert("RGB")
    except Exception:  # noqa: BLE001 - any failure is what we want here
        return True
    return False


def _truncated(rng: np.random.Generator, jpeg: bytes) -> bytes:
    """The JPEG cut to 30..70% of its bytes (cut further if Pillow still decodes it)."""
    cut = int(len(jpeg) * rng.uniform(0.3, 0.7))
    while not fails_to_decode(jpeg[:cut]):
        cut = cut * 3 // 4
    return jpeg[:cut]


def _empty(rng: np.random.Generator, jpeg: bytes) -> bytes:
    return b""


def _not_jpeg(rng: np.random.Generator, jpeg: bytes) -> bytes:
    """Either a short text (a saved error page) or random bytes."""
    if rng.random() < 0.5:
        return b"<html><body><h1>404 Not Found</h1>The image was removed.</body></html>\n"
    return rng.bytes(int(rng.integers(200, 20_000)))


def _bad_header(rng: np.random.Generator, jpeg: bytes) -> bytes:
    """The JPEG with its first 16..256 bytes (SOI marker included) overwritten."""
    n = int(rng.integers(16, 257))
    return rng.bytes(n) + jpeg[n:]


_WRITERS = {"truncated": _truncated, "empty": _empty, "not_jpeg": _not_jpeg, "bad_header": _bad_header}


def corrupt_bytes(kind: str, rng: np.random.Generator, jpeg: bytes) -> bytes:
    """Bytes of a broken file of ``kind`` made from a valid ``jpeg``, checked to fail decoding.

    Random bytes can, very rarely, pass for another format (e.g. raw TGA has
    no magic number), so a draw that still decodes is simply drawn again.
    """
    for _ in range(100):
        data = _WRITERS[kind](rng, jpeg)
        if fails_to_decode(data):
            return data
    raise RuntimeError(f"could not make a {kind} file that fails to decode")
