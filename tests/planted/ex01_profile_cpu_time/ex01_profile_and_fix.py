"""Planted defect: times each stage with CPU time (time.process_time), so a stage that waits counts as free."""

import time

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches  # noqa: F401


def profile_stages(stages, inputs):
    totals = {name: 0.0 for name, _ in stages}
    for value in inputs:
        for name, stage in stages:
            start = time.process_time()
            value = stage(value)
            totals[name] += time.process_time() - start
    return totals
