"""Correct alternative: a stage-by-stage profiler, and a loader that drafts, crops in the drafted pixels, then resizes."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from loaderlab.images import CROP, DECODE_ERRORS, RESIZE, Sample, decode_failure_reason

log = logging.getLogger(__name__)


def profile_stages(stages: Sequence[tuple[str, Callable[[Any], Any]]], inputs: Iterable[Any]) -> dict[str, float]:
    """Runs all inputs through one stage, then all its outputs through the next: the same totals."""
    values = list(inputs)
    totals = {}
    for name, stage in stages:
        start = time.perf_counter()
        values = [stage(value) for value in values]
        totals[name] = time.perf_counter() - start
    return totals


def find_bottleneck(seconds_by_stage: Mapping[str, float]) -> str:
    slowest = None
    for name, seconds in seconds_by_stage.items():
        if slowest is None or seconds > seconds_by_stage[slowest]:
            slowest = name
    if slowest is None:
        raise ValueError("no stages")
    return slowest


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def _crop(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        width, height = image.size
        scale = RESIZE / min(width, height)
        image.draft("RGB", (round(width * scale), round(height * scale)))
        # The centre square of side CROP / scale in source pixels, in the drafted image's pixels, rounded.
        factor = image.size[0] / width
        side = CROP / scale * factor
        left, top = (image.size[0] - side) / 2, (image.size[1] - side) / 2
        box = (round(left), round(top), round(left + side), round(top + side))
        return np.asarray(image.convert("RGB").crop(box).resize((CROP, CROP), Image.BILINEAR))


def _good(samples: Iterable[Sample], skipped: list[Skipped] | None) -> Iterator[tuple[np.ndarray, int]]:
    for path, label in samples:
        try:
            yield _crop(path), label
        except FileNotFoundError:
            raise
        except DECODE_ERRORS as err:
            reason = decode_failure_reason(path, err)
            log.warning("skipping %s (%s)", path, reason)
            if skipped is not None:
                skipped.append(Skipped(Path(path), reason))


def load_batches(
    samples: Sequence[Sample], batch_size: int = 32, skipped: list[Skipped] | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    good = _good(samples, skipped)
    while batch := list(itertools.islice(good, batch_size)):
        images, labels = zip(*batch)
        yield np.stack(images), np.array(labels, dtype=np.int64)


def decode_less_crop(path: Path | str) -> np.ndarray:
    """Step 5 without a DCT scale: simplejpeg decodes the whole JPEG (faster than Pillow's decoder), and torchvision's
    v2 resize (the same antialiased kernel) resamples only the window; anything else takes the draft route."""
    import simplejpeg
    import torch
    from torchvision.transforms.v2 import functional as F

    from loaderlab.images import crop_window

    data = Path(path).read_bytes()
    if not data.startswith(b"\xff\xd8"):  # not a JPEG: the draft route (Pillow decodes it, or says why not)
        return _crop(Path(path))
    pixels = simplejpeg.decode_jpeg(data, colorspace="RGB")
    left, top, right, bottom = (round(edge) for edge in crop_window(pixels.shape[1], pixels.shape[0]))
    window = torch.from_numpy(np.ascontiguousarray(pixels[top:bottom, left:right])).permute(2, 0, 1)
    return F.resize(window, [CROP, CROP], antialias=True).permute(1, 2, 0).contiguous().numpy()
