"""Correct alternative: a timestamp profiler, and a loader without draft mode that shrinks with Image.reduce()."""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from loaderlab.images import CROP, RESIZE, Sample

log = logging.getLogger("ex01.loader")


def profile_stages(stages: Sequence[tuple[str, Callable[[Any], Any]]], inputs: Iterable[Any]) -> dict[str, float]:
    names = [name for name, _ in stages]
    totals = dict.fromkeys(names, 0.0)
    for value in inputs:
        marks = [time.perf_counter()]
        for _, stage in stages:
            value = stage(value)
            marks.append(time.perf_counter())
        for name, begin, end in zip(names, marks, marks[1:]):
            totals[name] += end - begin
    return totals


def find_bottleneck(seconds_by_stage: Mapping[str, float]) -> str:
    return max(seconds_by_stage.items(), key=operator.itemgetter(1))[0]


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def _crop(path: Path) -> np.ndarray:
    image = Image.open(path)
    image.load()  # decode errors surface here
    image = image.convert("RGB")
    width, height = image.size
    short = min(width, height)
    factor = max(1, short // RESIZE)  # the largest whole shrink that keeps the short side at least 256
    if factor > 1:
        image = image.reduce(factor)
    scale = RESIZE / short  # resize factor of the original
    new_w, new_h = int(width * scale) if width > height else RESIZE, int(height * scale) if height > width else RESIZE
    left, top = round((new_w - CROP) / 2), round((new_h - CROP) / 2)
    sx, sy = image.size[0] / new_w, image.size[1] / new_h
    box = (left * sx, top * sy, (left + CROP) * sx, (top + CROP) * sy)
    return np.asarray(image.resize((CROP, CROP), Image.BILINEAR, box=box), dtype=np.uint8)


def load_batches(
    samples: Sequence[Sample], batch_size: int = 32, skipped: list[Skipped] | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    report = skipped if skipped is not None else []
    images, labels = [], []
    for path, label in samples:
        if not Path(path).exists():
            raise FileNotFoundError(path)
        try:
            image = _crop(path)
        except Exception as err:  # anything a broken file raises; a missing one was ruled out above
            entry = Skipped(Path(path), f"{type(err).__name__}: {err}" if str(err) else type(err).__name__)
            report.append(entry)
            log.warning("%s", entry)
            continue
        images.append(image)
        labels.append(label)
        if len(images) == batch_size:
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
    if images:
        yield np.stack(images), np.array(labels, dtype=np.int64)
