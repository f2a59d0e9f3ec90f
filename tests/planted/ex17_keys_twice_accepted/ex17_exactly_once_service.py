"""Planted: the arguments checked for sizes and deadline, not for a key given twice."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def check_arguments(keys: Sequence[int], sizes: Sequence[int], batch_timeout_s: float) -> None:
    """Sizes and deadline checked."""
    if any(size < 1 for size in sizes) or sum(sizes) != len(keys):
        raise ValueError(f"sizes {list(sizes)} do not fit {len(keys)} keys")
    if not batch_timeout_s > 0:
        raise ValueError(f"batch_timeout_s must be above 0, got {batch_timeout_s}")


honest.check_arguments = check_arguments   # exactly_once calls it by the solution's name
