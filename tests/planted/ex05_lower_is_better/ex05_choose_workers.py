"""Planted defect: measure(n) is read as seconds per epoch (lower is better), so the slowest count wins."""

import statistics

from solutions.ex05_choose_workers import worker_counts


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    counts = worker_counts(candidates)
    if len(counts) == 1:
        return counts[0]
    runs = {n: [] for n in counts}
    for _ in range(repeats):
        for n in counts:
            runs[n].append(measure(n))
    medians = {n: statistics.median(values) for n, values in runs.items()}
    best = min(medians.values())  # planted: a throughput is higher-is-better
    return min(n for n in counts if medians[n] <= (1 + tolerance) * best)
