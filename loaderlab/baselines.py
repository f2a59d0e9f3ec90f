"""The naive loaders that notebooks and graders measure against. Deliberately plain."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from loaderlab.images import Sample, resize_center_crop
from loaderlab.sim import SlowStorage

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def naive_image(path: Path | str) -> np.ndarray:
    """One image the way most first loaders do it: float32, normalised, CHW, at full cost."""
    image = Image.open(path).convert("RGB")
    image = resize_center_crop(image)
    array = np.asarray(image, dtype=np.float32) / 255.0
    array = (array - IMAGENET_MEAN) / IMAGENET_STD
    return array.transpose(2, 0, 1)


def naive_batches(samples: Sequence[Sample], batch_size: int = 32) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Batches of (float32 NCHW images, int64 labels), one image after another."""
    for start in range(0, len(samples), batch_size):
        chunk = samples[start : start + batch_size]
        images = np.stack([naive_image(path) for path, _ in chunk])
        yield images, np.array([label for _, label in chunk], dtype=np.int64)


def sequential_reads(storage: SlowStorage, paths: Iterable[Path | str]) -> Iterator[bytes]:
    """Each file's bytes, one request at a time."""
    for path in paths:
        yield storage.read(path)
