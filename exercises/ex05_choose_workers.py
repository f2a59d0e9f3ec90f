"""Exercise 05: choose `num_workers` from measurements that are noisy.

`choose_num_workers(measure, candidates)` calls `measure(n)` (a throughput for `n`
workers, higher is better) and returns the smallest candidate whose throughput is
within 5% of the best. Real measurements wobble: a background process, a cold page
cache or a worker starting up can make one run look much slower or faster than it
is. So measure each candidate several times and compare medians, never single runs.

Build it in steps; the grader reports each one:
  1. the input (TODO(ex05, step 1)): bad candidate lists are refused before anything is
     measured; a single candidate is the answer;
  2. the choice (TODO(ex05, step 2)): synthetic throughput curves with known answers, some
     with planted outliers, `measure` calls counted;
  3. a real sweep: your chooser picks a worker count for a real DataLoader, which the
     grader re-measures against the best count it finds.
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
    - `candidates` any sequence (a list, tuple or range) of integers, Python's or NumPy's
      (numpy.int64 is an integer too), in any order, duplicates counting once ([4, 2, 2] is
      the sweep 2, 4); empty, or holding anything but an integer >= 0: ValueError with a
      message that says what is wrong, and `measure` is never called;
    - a single (distinct) candidate: return it (there is nothing to compare);
    - each distinct candidate measured exactly `repeats` times (the grader asks for 3,
      the default, and for 5): a real measurement is a whole epoch, so never more, and
      `measure(n)` already warms its loader up, so no extra warm-up run either;
    - candidates compared by the median of their runs: one outlier run (x0.6 or x1.6)
      in three must not change the answer;
    - return the SMALLEST candidate whose median is at least (1 - tolerance) x the
      best median, not the fastest: beyond that point more workers cost memory and
      start-up for a gain lost in the noise. The grader also asks for tolerance=0.1.
    """
    # TODO(ex05, step 1): refuse a sweep that has no answer or holds something that is not a worker count, before
    # measuring anything, and answer a single candidate without measuring.
    raise NotImplementedError("TODO(ex05, step 1) in exercises/ex05_choose_workers.py: choose_num_workers, the input")
    # TODO(ex05, step 2): measure every candidate `repeats` times and keep one typical figure per candidate that one
    # outlier cannot move. Measuring in rounds (every candidate once per round) spreads a busy spell of the machine
    # over all the candidates instead of one.
    raise NotImplementedError("TODO(ex05, step 2) in exercises/ex05_choose_workers.py: choose_num_workers, measuring")
    # TODO(ex05, step 2): from those figures, return the smallest candidate within `tolerance` of the best.
    raise NotImplementedError("TODO(ex05, step 2) in exercises/ex05_choose_workers.py: choose_num_workers, the rule")
