"""Planted defect: broken files are skipped but never reported."""

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, profile_stages  # noqa: F401
from solutions.ex01_profile_and_fix import load_batches as _load_batches


def load_batches(samples, batch_size=32, skipped=None):
    return _load_batches(samples, batch_size, skipped=[])
