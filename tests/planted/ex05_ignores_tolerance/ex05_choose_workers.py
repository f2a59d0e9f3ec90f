"""Planted defect: the 5% of the default is written into the rule; the `tolerance` argument is ignored."""

from solutions.ex05_choose_workers import choose_num_workers as _choose


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    return _choose(measure, candidates, tolerance=0.05, repeats=repeats)  # planted
