"""Planted defect: a single candidate is refused as if it were bad input."""

from solutions.ex05_choose_workers import choose_num_workers as _choose


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    if len(set(candidates)) == 1:
        raise ValueError("need at least two candidates to compare")  # planted
    return _choose(measure, candidates, tolerance=tolerance, repeats=repeats)
