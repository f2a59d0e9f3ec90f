"""Planted defect: indexes `inputs`, so a generator (any one-pass iterable) breaks it."""

import time

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches  # noqa: F401


def profile_stages(stages, inputs):
    totals = {name: 0.0 for name, _ in stages}
    for i in range(len(inputs)):
        value = inputs[i]
        for name, stage in stages:
            start = time.perf_counter()
            value = stage(value)
            totals[name] += time.perf_counter() - start
    return totals
