"""Planted defect: times the whole pipeline and splits the total evenly across stages."""

import time

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches  # noqa: F401


def profile_stages(stages, inputs):
    start = time.perf_counter()
    for value in inputs:
        for _, stage in stages:
            value = stage(value)
    share = (time.perf_counter() - start) / len(stages)
    return {name: share for name, _ in stages}
