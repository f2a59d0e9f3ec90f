"""Exercise 05, reference solution: choose num_workers from noisy measurements.

Rounds are interleaved (every candidate once per round, like loaderlab.bench.compare), so a
busy spell on the machine slows all candidates alike; each candidate's median over the rounds
ignores one outlier in three. The rule: the smallest candidate within `tolerance` of the best,
because past that point extra workers cost memory and start-up time for a gain lost in noise.
"""

from __future__ import annotations

import numbers
import statistics
from collections.abc import Callable, Sequence

Measure = Callable[[int], float]


def worker_counts(candidates: Sequence[int]) -> list[int]:
    """The distinct candidates, sorted; ValueError for an empty sweep or anything but an integer >= 0."""
    counts = list(candidates)
    if not counts:
        raise ValueError("candidates is empty: give at least one worker count to try, e.g. [0, 1, 2, 4]")
    bad = [n for n in counts if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0]
    if bad:
        raise ValueError(f"candidates must be worker counts (integers, 0 or more); {bad} in {counts} are not")
    return sorted({int(n) for n in counts})


def choose_num_workers(measure: Measure, candidates: Sequence[int], *, tolerance: float = 0.05,
                       repeats: int = 3) -> int:
    """The smallest candidate whose median measured throughput is within `tolerance` of the best median.

    `measure(n)` returns a throughput (items per second, higher is better) for `n` workers.
    Each distinct candidate is measured `repeats` times, in interleaved rounds. A single
    candidate is returned unmeasured.
    """
    counts = worker_counts(candidates)
    if repeats < 1 or not 0 <= tolerance < 1:
        raise ValueError(f"need repeats >= 1 and 0 <= tolerance < 1, got repeats={repeats}, tolerance={tolerance}")
    if len(counts) == 1:
        return counts[0]
    measured: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(repeats):
        for n in counts:
            measured[n].append(float(measure(n)))
    medians = {n: statistics.median(values) for n, values in measured.items()}
    best = max(medians.values())
    return min(n for n in counts if medians[n] >= (1 - tolerance) * best)
