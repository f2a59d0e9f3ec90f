"""What "shuffled" means, measured: how much of the written (file) order survives in an epoch's order.

An epoch's order is given as the written positions of its items, in the order they came.
A full shuffle of n items leaves about 1/n of consecutive pairs as written neighbours and a
rank correlation near 0; shuffling whole batches, or shards read straight through, keeps most
neighbours together however the batches or shards are ordered.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def adjacent_pair_share(order: Sequence[int]) -> float:
    """Share of consecutive items that were also neighbours (i, i+1) when written.

    1.0 for the written order; about 1/len(order) for a full shuffle; about (B-1)/B when
    batches of B are shuffled but not the samples in them. A shuffle of shard order alone
    keeps it near 1 (each shard is read through in order).
    """
    if len(order) < 2:
        return 0.0
    return sum(b == a + 1 for a, b in zip(order, order[1:])) / (len(order) - 1)


def mean_neighbour_distance(order: Sequence[int]) -> float:
    """Mean |written index of next item - written index of this one|, over len(order): about 1/3 for a full shuffle."""
    if len(order) < 2:
        return 0.0
    steps = np.abs(np.diff(np.asarray(order)))
    return float(steps.mean() / len(order))


def rank_correlation(order: Sequence[int]) -> float:
    """Correlation between arrival position and written position: 1.0 for the written order, about 0 shuffled."""
    if len(order) < 2:
        return 0.0
    return float(np.corrcoef(np.arange(len(order)), np.asarray(order))[0, 1])
