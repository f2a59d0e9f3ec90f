"""Planted defect: a running maximum that starts at 0.0, so when every stage measured 0.0 it names none."""

from solutions.ex01_profile_and_fix import Skipped, load_batches, profile_stages  # noqa: F401


def find_bottleneck(seconds_by_stage):
    slowest, most = None, 0.0
    for name, seconds in seconds_by_stage.items():
        if seconds > most:
            slowest, most = name, seconds
    return slowest
