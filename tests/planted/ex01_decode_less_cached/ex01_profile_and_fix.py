"""Planted defect: memoises crops by path, so the timing rounds after the first measure a dict lookup."""

import functools

from solutions import ex01_profile_and_fix as solution
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401


@functools.lru_cache(maxsize=None)
def decode_less_crop(path):
    return solution.decode_less_crop(path)
