"""Planted: a job that ends short is asked again for the whole epoch (duplicates are dropped anyway)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def still_missing(keys: list[int], received: set[int]) -> list[int]:
    """Every key of the epoch, again."""
    return list(keys)


honest.still_missing = still_missing   # exactly_once calls it by the solution's name
