"""Planted defect: the last partial batch is silently dropped."""

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, profile_stages  # noqa: F401
from solutions.ex01_profile_and_fix import load_batches as _load_batches


def load_batches(samples, batch_size=32, skipped=None):
    for images, labels in _load_batches(samples, batch_size, skipped):
        if len(images) == batch_size:
            yield images, labels
