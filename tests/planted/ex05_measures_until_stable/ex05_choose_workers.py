"""Planted defect: each candidate is measured until its last `repeats` runs agree within 2% (up to 12 runs)."""

import statistics

from solutions.ex05_choose_workers import worker_counts


def _settled(measure, n, repeats):
    runs = [measure(n) for _ in range(repeats)]
    while max(runs[-repeats:]) > 1.02 * min(runs[-repeats:]) and len(runs) < 12:  # planted: open-ended
        runs.append(measure(n))
    return statistics.median(runs[-repeats:])


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    counts = worker_counts(candidates)
    if len(counts) == 1:
        return counts[0]
    medians = {n: _settled(measure, n, repeats) for n in counts}
    best = max(medians.values())
    return min(n for n in counts if medians[n] >= (1 - tolerance) * best)
