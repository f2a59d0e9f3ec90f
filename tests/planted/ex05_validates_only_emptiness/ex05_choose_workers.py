"""Planted defect: only an empty sweep is refused; negative counts, fractions and strings are measured."""

import statistics


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    if not candidates:
        raise ValueError("candidates is empty")
    counts = sorted(set(candidates), key=float)  # planted: no check that each is an integer >= 0
    if len(counts) == 1:
        return counts[0]
    runs = {n: [measure(n) for _ in range(repeats)] for n in counts}
    medians = {n: statistics.median(values) for n, values in runs.items()}
    best = max(medians.values())
    return min((n for n in counts if medians[n] >= (1 - tolerance) * best), key=float)
