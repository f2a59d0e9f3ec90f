"""Exercise 05: choose `num_workers` from measurements that are noisy.

`choose_num_workers(measure, candidates)` calls `measure(n)` (a throughput for `n`
workers, higher is better) and returns the smallest candidate whose throughput is
within 5% of the best. Real measurements wobble: a background process, a cold page
cache or a worker starting up can make one run look much slower or faster than it
is. So measure each candidate several times and compare medians, never single runs.

The grader tries your chooser on synthetic throughput curves with known answers
(some with planted outliers), counts how often you call `measure`, and then lets
it choose for a real DataLoader.
Grade: `pytest grader/test_ex05_choose_workers.py`. Hints: `make hint EX=ex05`.
"""

from __future__ import annotations

import statistics  # noqa: F401  (you will need it)
from collections.abc import Callable, Sequence

Measure = Callable[[int], float]


def choose_num_workers(measure: Measure, candidates: Sequence[int], *, tolerance: float = 0.05,
                       repeats: int = 3) -> int:
    """The smallest candidate whose median measured throughput is within `tolerance` of the best median.

    Contract (the grader checks each point):
    - empty `candidates`, or one that is not a non-negative int: ValueError with a
      message that says what is wrong (and `measure` is never called);
    - one candidate: return it;
    - each candidate measured `repeats` times (3 to 7 in all; fewer cannot outvote
      an outlier, more wastes the learner's time), compared by the median;
    - return the SMALLEST candidate whose median is at least (1 - tolerance) x the
      best median, not the fastest: beyond that point more workers cost memory and
      start-up for a gain lost in the noise.
    """
    # TODO(ex05a): check the input: sorted(set(candidates)) must not be empty and
    # must hold only ints >= 0; raise ValueError("candidates ...") otherwise.
    # One candidate: return it without measuring.
    raise NotImplementedError("TODO(ex05a) in exercises/ex05_choose_workers.py: choose_num_workers, check the input")
    # TODO(ex05b): measure in rounds: for each of `repeats` rounds, call measure(n)
    # once for every candidate (interleaving spreads a busy spell over all of
    # them); keep a list of values per candidate; take statistics.median of each.
    # TODO(ex05c): best = the largest median; return the smallest n whose median
    # >= (1 - tolerance) * best.
