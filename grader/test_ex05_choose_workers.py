"""Exercise 05: choosing num_workers, graded in steps: the input; the choice on synthetic throughput curves with
known answers (clean, then noisy, with the measurements counted); then a real sweep."""

import pytest

EXERCISE = "ex05_choose_workers"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "the input")
def test_bad_input_is_rejected(grade):
    """No candidates, a negative count, a fraction or a string raise ValueError with a message, before anything is
    measured."""
    grade()


@pytest.mark.step(1, "the input")
def test_single_candidate_is_returned(grade):
    """With one distinct candidate ([3], [0], [2, 2]), that candidate is the answer."""
    grade()


@pytest.mark.step(2, "the choice")
def test_smallest_within_five_percent_on_clean_curves(grade):
    """On noiseless curves (a knee, a peak, a plateau, a gap just inside the tolerance, unsorted and duplicated candidates, tolerance 0.1
    and 0; candidates as a list, a range and a tuple of NumPy integers): the smallest count within the tolerance of
    the best, not the fastest."""
    grade()


@pytest.mark.step(2, "the choice")
def test_robust_to_outliers(grade):
    """With 1% noise and outlier runs (one in three, or two in five with repeats=5; x0.6 to x2.0) for some
    candidates, the answer is unchanged: medians of repeated runs, not single runs, means or best runs."""
    grade()


@pytest.mark.step(2, "the choice")
def test_stays_within_the_measurement_budget(grade):
    """Each distinct candidate is measured exactly `repeats` times (3 by default, 5 when asked; duplicates once):
    each real run is a whole epoch."""
    grade()


@pytest.mark.step(3, "a real sweep")
@pytest.mark.throughput
@pytest.mark.timeout_s(180)
def test_real_sweep_choice_is_near_the_best(grade):
    """On a real sweep of the tutorial DataLoader (0 to cores + 1 workers, steady-state epochs of 64 images),
    the chosen count, re-measured in interleaved rounds, reaches 0.75x the throughput of the grader's best count.
    Skipped on one core, where every count is about as fast."""
    grade()
