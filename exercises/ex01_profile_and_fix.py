"""Exercise 01: measure where the time goes, then fix the sequential loader.

(a) `profile_stages` and `find_bottleneck`: time each stage of a pipeline and
    name the slowest. Profile before you tune.
(b) `load_batches`: a sequential batch loader that
    - yields (uint8 (N, 224, 224, 3) images, int64 (N,) labels), the same
      centre crops as `loaderlab.images.reference_crop` (256 short side, then
      224 centre) within a mean absolute difference of 2 levels per image
      (6 at worst), in sample order;
    - skips files that do not decode (truncated, empty, not a JPEG), appends
      `Skipped(path, reason)` for each to `skipped` and logs it: never a silent
      loss, never a None in a batch; a missing file is a wrong path and raises;
    - keeps every batch full except the last;
    - applies the cheap wins (uint8, JPEG draft mode, crop and resize in one
      call) to run at least 1.5x the naive loop in `loaderlab.baselines`.
Grade: `pytest grader/test_ex01_profile_and_fix.py`. Hints: `make hint EX=ex01`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loaderlab.images import Sample


def profile_stages(stages: Sequence[tuple[str, Callable[[Any], Any]]], inputs: Iterable[Any]) -> dict[str, float]:
    """Feed each input through the stages in order (each stage gets the previous one's output).

    Returns the total seconds spent in each stage, keyed by stage name, in stage order.
    """
    # TODO(ex01a): for each input, call each stage on the previous stage's output,
    # timing each call with time.perf_counter() and adding it to that stage's total.
    raise NotImplementedError("TODO(ex01a) in exercises/ex01_profile_and_fix.py: profile_stages")


def find_bottleneck(seconds_by_stage: Mapping[str, float]) -> str:
    """The name of the stage that took the most time."""
    # TODO(ex01a): return the key with the largest value.
    raise NotImplementedError("TODO(ex01a) in exercises/ex01_profile_and_fix.py: find_bottleneck")


@dataclass(frozen=True)
class Skipped:
    """A file the loader could not use, and why."""

    path: Path
    reason: str


def load_batches(
    samples: Sequence[Sample], batch_size: int = 32, skipped: list[Skipped] | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (uint8 (N, 224, 224, 3) centre crops, int64 (N,) labels) in sample order.

    Unreadable files are skipped, appended to `skipped` with the reason, and logged;
    batches stay full except the last.
    """
    # TODO(ex01b): decode each sample cheaply (see the module docstring), catch
    # the errors a bad file raises (not FileNotFoundError), record Skipped(path,
    # reason), and yield np.stack-ed batches of batch_size.
    raise NotImplementedError("TODO(ex01b) in exercises/ex01_profile_and_fix.py: load_batches")
