"""Planted: each rank a contiguous block of the keys (as a DataLoader's shards often are)."""

from __future__ import annotations

from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def rank_plan(num_samples: int, rank: int, world_size: int, batch_size: int) -> tuple[list[int], list[int]]:
    """A contiguous block per rank, its batches by the rule."""
    if world_size < 1 or not 0 <= rank < world_size or batch_size < 1 or num_samples < world_size:
        raise ValueError("no plan")
    base, extra = divmod(num_samples, world_size)
    first = rank * base + min(rank, extra)
    keys = list(range(first, first + base + (rank < extra)))
    count = -(-(-(-num_samples // world_size)) // batch_size)
    share, spare = divmod(len(keys), count)
    return keys, [share + (i < spare) for i in range(count)]
