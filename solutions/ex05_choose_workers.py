"""Exercise 05, reference solution: choose num_workers from noisy measurements.

Rounds are interleaved (every candidate once per round, like loaderlab.bench.compare), so a
busy spell on the machine slows all candidates alike; each candidate's median over the rounds
ignores one outlier in three. The rule: the smallest candidate within `tolerance` of the best,
because past that point extra workers cost memory and start-up time for a gain lost in noise.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

Measure = Callable[[int], float]


def choose_num_workers(measure: Measure, candidates: Sequence[int], *, tolerance: float = 0.05,
                       repeats: int = 3) -> int:
    """The smallest candidate whose median measured throughput is within `tolerance` of the best median.

    `measure(n)` returns a throughput (items per second, higher is better) for `n` workers.
    Each candidate is measured `repeats` times in interleaved rounds. A single candidate is
    returned unmeasured.
    """
    counts = sorted(set(candidates))
    if not counts:
        raise ValueError("candidates is empty: give at least one worker count to try, e.g. [0, 1, 2, 4]")
    if any(not isinstance(n, int) or n < 0 for n in counts):
        raise ValueError(f"candidates must be worker counts (integers, 0 or more), got {list(candidates)}")
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
