"""Planted defect: one run per candidate, so a single outlier decides the answer."""

from solutions.ex05_choose_workers import choose_num_workers as _choose


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    return _choose(measure, candidates, tolerance=tolerance, repeats=1)  # planted: repeats ignored
