"""Planted: each batch's keys sorted for a tidy ledger, the labels and images left as they came."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def cut(waiting: list[tuple[int, Any, Any]], size: int) -> Batch:
    """The first `size` waiting samples, the keys in order."""
    taken, waiting[:size] = waiting[:size], []
    return (np.asarray(sorted(key for key, _, _ in taken), dtype=np.int64), np.stack([label for _, label, _ in taken]),
            np.stack([image for _, _, image in taken]))


honest.cut = cut   # exactly_once calls it by the solution's name
