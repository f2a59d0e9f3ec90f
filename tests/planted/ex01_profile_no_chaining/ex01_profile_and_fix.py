"""Planted defect: calls every stage on the input itself instead of on the previous stage's output."""

import time

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches  # noqa: F401


def profile_stages(stages, inputs):
    totals = {name: 0.0 for name, _ in stages}
    for value in inputs:
        for name, stage in stages:
            start = time.perf_counter()
            stage(value)
            totals[name] += time.perf_counter() - start
    return totals
