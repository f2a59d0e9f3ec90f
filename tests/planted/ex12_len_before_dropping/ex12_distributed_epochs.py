"""Exercise 12, planted defect: __len__ counts the remainder that __iter__ drops, so DataLoaders report a batch too many."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, Sampler, get_worker_info

TRAINING_POLICY = "drop"


class DistributedEpochSampler(Sampler[int]):
    """This rank's indices of range(dataset_size): exactly once over all ranks for evaluation, equal counts for training."""

    def __init__(self, dataset_size: int, world_size: int, rank: int, training: bool, seed: int = 0) -> None:
        if world_size < 1:
            raise ValueError(f"world_size must be at least 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size - 1}] for world_size={world_size}, got {rank}")
        if dataset_size < 0:
            raise ValueError(f"dataset_size must be at least 0, got {dataset_size}")
        self.dataset_size, self.world_size, self.rank = dataset_size, world_size, rank
        self.training, self.seed = training, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose permutation the next iteration follows (call it on every rank, with the same value)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.training:
            return iter(range(self.rank, self.dataset_size, self.world_size))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.dataset_size, generator=generator).tolist()
        kept = self.dataset_size // self.world_size * self.world_size
        return iter(order[self.rank:kept:self.world_size])

    def __len__(self) -> int:
        if self.training:
            return -(-self.dataset_size // self.world_size)  # the remainder counted, though __iter__ drops it
        return len(range(self.rank, self.dataset_size, self.world_size))


def exact_mean(scores: Sequence[float]) -> float:
    """The mean of every rank's scores together, returned on every rank: all_reduce of (sum, count)."""
    totals = torch.tensor([float(sum(scores)), float(len(scores))], dtype=torch.float64)
    dist.all_reduce(totals)
    total, count = totals.tolist()
    if count == 0:
        raise ValueError("no rank had any score: the mean of nothing is undefined")
    return total / count


class WorkerSplitStream(IterableDataset):
    """The sampler's indices for a DataLoader of `batch_size`, split among its workers by whole batches."""

    def __init__(self, sampler: DistributedEpochSampler, batch_size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size

    def __iter__(self) -> Iterator[int]:
        worker = get_worker_info()
        worker_id, workers = (0, 1) if worker is None else (worker.id, worker.num_workers)
        indices = list(self.sampler)
        for batch, start in enumerate(range(0, len(indices), self.batch_size)):
            if batch % workers == worker_id:
                yield from indices[start:start + self.batch_size]
