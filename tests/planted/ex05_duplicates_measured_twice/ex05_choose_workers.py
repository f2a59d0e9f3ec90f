"""Planted defect: duplicate candidates are not merged, so each copy is measured `repeats` times."""

import statistics

from solutions.ex05_choose_workers import worker_counts


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    if len(worker_counts(candidates)) == 1:
        return candidates[0]
    counts = sorted(candidates)  # planted: not sorted(set(candidates))
    runs = {n: [] for n in counts}
    for _ in range(repeats):
        for n in counts:
            runs[n].append(measure(n))
    medians = {n: statistics.median(values) for n, values in runs.items()}
    best = max(medians.values())
    return min(n for n in counts if medians[n] >= (1 - tolerance) * best)
