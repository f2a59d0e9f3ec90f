"""Planted defect: sorts the stages by time and takes the last, so a tie goes to the later stage."""

from solutions.ex01_profile_and_fix import Skipped, load_batches, profile_stages  # noqa: F401


def find_bottleneck(seconds_by_stage):
    return sorted(seconds_by_stage, key=seconds_by_stage.get)[-1]
