"""Planted defect: refuses a batch size larger than the sample count instead of yielding one short batch."""

from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, profile_stages  # noqa: F401
from solutions.ex01_profile_and_fix import load_batches as _load_batches


def load_batches(samples, batch_size=32, skipped=None):
    if batch_size > len(samples):
        raise ValueError(f"batch_size {batch_size} is larger than the {len(samples)} samples")
    return _load_batches(samples, batch_size, skipped)
