"""Planted defect: times each stage with timeit, then calls it again for the value it passes on."""

import timeit

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches  # noqa: F401


def profile_stages(stages, inputs):
    totals = {name: 0.0 for name, _ in stages}
    for value in inputs:
        for name, stage in stages:
            totals[name] += timeit.timeit(lambda: stage(value), number=1)
            value = stage(value)
    return totals
