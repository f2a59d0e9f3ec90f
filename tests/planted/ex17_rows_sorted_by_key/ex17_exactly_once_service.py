"""Planted: each batch's rows sorted by key, whole (a tidy, reproducible order for the ledger)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def cut(waiting: list[tuple[int, Any, Any]], size: int) -> Batch:
    """The first `size` waiting samples, sorted by key."""
    taken, waiting[:size] = sorted(waiting[:size], key=lambda row: row[0]), []
    return (np.asarray([key for key, _, _ in taken], dtype=np.int64), np.stack([label for _, label, _ in taken]),
            np.stack([image for _, _, image in taken]))


honest.cut = cut   # exactly_once calls it by the solution's name
