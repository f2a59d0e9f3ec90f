"""Exercise 01, reference solution: stage profiling, and a sequential loader that survives bad files."""

from __future__ import annotations

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
    """Feed each input through the stages in order; total seconds spent in each stage, in stage order."""
    totals = {name: 0.0 for name, _ in stages}
    for value in inputs:
        for name, stage in stages:
            start = time.perf_counter()
            value = stage(value)
            totals[name] += time.perf_counter() - start
    return totals


def find_bottleneck(seconds_by_stage: Mapping[str, float]) -> str:
    """The stage that took the most time; on a tie, the first of the tied stages (what max() gives)."""
    if not seconds_by_stage:
        raise ValueError("no stages were timed")
    return max(seconds_by_stage, key=seconds_by_stage.__getitem__)


@dataclass(frozen=True)
class Skipped:
    """A file the loader could not use, and why."""

    path: Path
    reason: str


def fast_center_crop(path: Path | str) -> np.ndarray:
    """The reference 256-resize + 224 centre crop as uint8 HWC, computed cheaply.

    JPEG draft mode decodes large images at 1/2 or 1/4 scale (never below the
    resize target), and one resize call with `box` crops and scales together.
    """
    with Image.open(path) as image:
        width, height = image.size
        if width <= height:
            resized = (RESIZE, int(RESIZE * height / width))
        else:
            resized = (int(RESIZE * width / height), RESIZE)
        image.draft("RGB", resized)
        left = round((resized[0] - CROP) / 2.0)
        top = round((resized[1] - CROP) / 2.0)
        scale_x, scale_y = image.size[0] / resized[0], image.size[1] / resized[1]
        box = (left * scale_x, top * scale_y, (left + CROP) * scale_x, (top + CROP) * scale_y)
        image = image.convert("RGB").resize((CROP, CROP), Image.BILINEAR, box=box)
        return np.asarray(image, dtype=np.uint8)


def report_skip(path: Path | str, reason: str, skipped: list[Skipped] | None) -> None:
    """Tell of a file that could not be used: a warning in the log, and a Skipped in `skipped` when one is given."""
    log.warning("skipped %s: %s", path, reason)
    if skipped is not None:
        skipped.append(Skipped(Path(path), reason))


def decoded(samples: Iterable[Sample], skipped: list[Skipped] | None,
            crop: Callable[[Path | str], np.ndarray] = fast_center_crop,
            report: Callable[[Path | str, str, list[Skipped] | None], None] = report_skip,
            ) -> Iterator[tuple[np.ndarray, int]]:
    """(crop, label) for each sample that decodes, in order; `report` is told of each one that does not."""
    for path, label in samples:
        try:
            image = crop(path)
        except FileNotFoundError:
            raise  # a wrong path is a bug in the sample list, not a bad image
        except DECODE_ERRORS as err:
            report(path, decode_failure_reason(path, err), skipped)
            continue
        yield image, label


def batched(pairs: Iterable[tuple[np.ndarray, int]], batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Stack (image, label) pairs into batches of `batch_size`, the last one partial if need be (never empty)."""
    images: list[np.ndarray] = []
    labels: list[int] = []
    for image, label in pairs:
        images.append(image)
        labels.append(label)
        if len(images) == batch_size:
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
    if images:
        yield np.stack(images), np.array(labels, dtype=np.int64)


def load_batches(
    samples: Sequence[Sample], batch_size: int = 32, skipped: list[Skipped] | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (uint8 (N, 224, 224, 3) centre crops, int64 (N,) labels) in sample order.

    Unreadable files are skipped, appended to `skipped` with the reason, and
    logged; batches stay full except the last. (Its pieces, decoded, report_skip
    and batched, are public so that tests/planted/ex01_* can replace one.)
    """
    yield from batched(decoded(samples, skipped), batch_size)
