"""Exercise 05, another route: each candidate's runs back to back, numpy's median, a walk up from the smallest."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import numpy as np

Measure = Callable[[int], float]


def choose_num_workers(measure: Measure, candidates: Sequence[int], *, tolerance: float = 0.05,
                       repeats: int = 3) -> int:
    """The smallest candidate whose median measured throughput is within `tolerance` of the best median."""
    if len(candidates) == 0:
        raise ValueError("no candidates to choose from")
    counts = set()
    for n in candidates:
        try:
            count = operator.index(n)
        except TypeError:
            raise ValueError(f"candidate {n!r} is not an integer worker count") from None
        if count < 0:
            raise ValueError(f"candidate {n!r} is negative: a worker count is 0 or more")
        counts.add(count)
    if len(counts) == 1:
        return counts.pop()
    medians = {n: float(np.median([measure(n) for _ in range(repeats)])) for n in sorted(counts)}
    bar = (1 - tolerance) * max(medians.values())
    return next(n for n, median in medians.items() if median >= bar)  # dicts keep the sorted order
