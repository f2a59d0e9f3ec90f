"""Exercise 01: profile first, then a sequential loader that is right on dirty data, then faster."""

import pytest

EXERCISE = "ex01_profile_and_fix"


def test_profile_times_each_stage(grade):
    """profile_stages chains the stages and times each one: known sleep costs come back within 20-30%."""
    grade()


def test_bottleneck_is_named(grade):
    """find_bottleneck names the slowest stage, wherever it sits in the pipeline."""
    grade()


def test_batches_match_reference(grade):
    """load_batches gives uint8 (N, 224, 224, 3) centre crops equal to the reference, labels in order, last batch kept."""
    grade()


def test_dirty_files_are_skipped_and_reported(grade):
    """On the dirty split, every broken file is skipped and reported once with a reason; the rest load in order."""
    grade()


def test_missing_file_raises(grade):
    """A path that does not exist raises FileNotFoundError instead of being skipped."""
    grade()


@pytest.mark.throughput
def test_faster_than_naive(grade):
    """With the cheap wins, the sequential loader runs at least 1.5x the naive loop."""
    grade()
