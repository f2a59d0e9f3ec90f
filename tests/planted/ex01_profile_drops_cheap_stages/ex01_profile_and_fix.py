"""Planted defect: leaves out stages that took under a millisecond in all, as if they were noise."""

import time
from collections import defaultdict

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches  # noqa: F401


def profile_stages(stages, inputs):
    totals = defaultdict(float)
    for value in inputs:
        for name, stage in stages:
            start = time.perf_counter()
            value = stage(value)
            totals[name] += time.perf_counter() - start
    return {name: seconds for name, seconds in totals.items() if seconds >= 0.001}
