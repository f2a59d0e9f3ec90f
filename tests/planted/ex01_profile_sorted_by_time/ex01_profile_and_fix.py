"""Planted defect: returns the stages sorted slowest first instead of in stage order."""

import time

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches  # noqa: F401


def profile_stages(stages, inputs):
    totals = {name: 0.0 for name, _ in stages}
    for value in inputs:
        for name, stage in stages:
            start = time.perf_counter()
            value = stage(value)
            totals[name] += time.perf_counter() - start
    return dict(sorted(totals.items(), key=lambda item: item[1], reverse=True))
