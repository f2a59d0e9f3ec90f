"""Exercise 05, planted defect: a worker count must be a Python int (`isinstance(n, int)`), so NumPy's integers
(numpy.int64 is no subclass of int), integers by the contract, are refused with ValueError."""

from solutions.ex05_choose_workers import choose_num_workers as _honest


def choose_num_workers(measure, candidates, *, tolerance=0.05, repeats=3):
    bad = [n for n in candidates if not isinstance(n, int) or n < 0]  # planted: Python's ints only
    if bad:
        raise ValueError(f"candidates must be integers >= 0; {bad} are not")
    return _honest(measure, candidates, tolerance=tolerance, repeats=repeats)
