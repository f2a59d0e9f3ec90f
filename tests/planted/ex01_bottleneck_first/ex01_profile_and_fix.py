"""Planted defect: find_bottleneck returns the first stage, not the slowest."""

from solutions.ex01_profile_and_fix import Skipped, load_batches, profile_stages  # noqa: F401


def find_bottleneck(seconds_by_stage):
    return next(iter(seconds_by_stage))
