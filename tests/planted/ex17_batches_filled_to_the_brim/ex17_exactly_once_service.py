"""Planted: every batch full but the rank's last (as a DataLoader batches)."""

from __future__ import annotations

from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def rank_plan(num_samples: int, rank: int, world_size: int, batch_size: int) -> tuple[list[int], list[int]]:
    """Every world_size-th key; full batches, the last one short."""
    if world_size < 1 or not 0 <= rank < world_size or batch_size < 1 or num_samples < world_size:
        raise ValueError("no plan")
    keys = list(range(rank, num_samples, world_size))
    return keys, [min(batch_size, len(keys) - start) for start in range(0, len(keys), batch_size)]
