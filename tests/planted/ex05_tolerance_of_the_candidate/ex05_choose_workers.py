"""Exercise 05, planted defect: "within tolerance" measured from the candidate up (best <= (1 + tolerance) x median),
not from the best down as the contract says (median >= (1 - tolerance) x best): the line sits at 95.24% of the
best, not 95%, and a candidate between the two is refused."""

import statistics

from solutions.ex05_choose_workers import choose_num_workers as _honest
from solutions.ex05_choose_workers import worker_counts


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    counts = worker_counts(candidates)
    if len(counts) == 1:
        return _honest(measure, candidates, tolerance=tolerance, repeats=repeats)
    medians = {n: statistics.median(measure(n) for _ in range(repeats)) for n in counts}
    best = max(medians.values())
    return min(n for n in counts if best <= (1 + tolerance) * medians[n])  # planted: the other formula
