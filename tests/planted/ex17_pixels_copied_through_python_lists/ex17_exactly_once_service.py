"""Planted: each image copied through a Python list on its way into a batch (a deep copy, to be safe)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def cut(waiting: list[tuple[int, Any, Any]], size: int) -> Batch:
    """The first `size` waiting samples as one batch, the images copied."""
    taken, waiting[:size] = waiting[:size], []
    return (np.asarray([key for key, _, _ in taken], dtype=np.int64), np.stack([label for _, label, _ in taken]),
            np.asarray([image.tolist() for _, _, image in taken], dtype=np.uint8))


honest.cut = cut   # exactly_once calls it by the solution's name
