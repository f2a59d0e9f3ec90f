"""Planted defect: returns the fastest candidate (the argmax of the medians), not the smallest within 5% of it."""

import statistics


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    counts = sorted(set(candidates))
    if not counts or any(not isinstance(n, int) or n < 0 for n in counts):
        raise ValueError(f"candidates must be worker counts (integers, 0 or more), got {list(candidates)}")
    medians = {n: statistics.median(measure(n) for _ in range(repeats)) for n in counts}
    return max(counts, key=medians.__getitem__)  # planted
