"""Exercise 12, a correct alternative: contiguous blocks instead of strided shares (rank r takes the r-th block,
the first N % world_size blocks one longer in evaluation), a numpy permutation seeded with (seed, epoch), and
a stream that picks the worker's batches with itertools.islice and shares its epoch through a locked Value."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, Sampler, get_worker_info

TRAINING_POLICY = "drop"


class DistributedEpochSampler(Sampler[int]):
    def __init__(self, dataset_size: int, world_size: int, rank: int, training: bool, seed: int = 0) -> None:
        if world_size <= 0:
            raise ValueError("world_size must be positive")
        if rank < 0 or rank >= world_size:
            raise ValueError(f"no rank {rank} in a world of {world_size}")
        if dataset_size < 0:
            raise ValueError("dataset_size must not be negative")
        self.dataset_size, self.world_size, self.rank = dataset_size, world_size, rank
        self.training, self.seed, self.epoch = training, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _block(self) -> tuple[int, int]:
        base, extra = divmod(self.dataset_size, self.world_size)
        if self.training:
            return self.rank * base, (self.rank + 1) * base
        start = self.rank * base + min(self.rank, extra)
        return start, start + base + (1 if self.rank < extra else 0)

    def __iter__(self) -> Iterator[int]:
        start, stop = self._block()
        if not self.training:
            return iter(range(start, stop))
        order = np.random.default_rng([self.seed, self.epoch]).permutation(self.dataset_size)
        return iter(order[start:stop].tolist())

    def __len__(self) -> int:
        start, stop = self._block()
        return stop - start


def exact_mean(scores: Sequence[float]) -> float:
    total = torch.tensor(float(sum(scores)), dtype=torch.float64)
    count = torch.tensor(float(len(scores)), dtype=torch.float64)
    dist.all_reduce(total)
    dist.all_reduce(count)
    return total.item() / count.item()


class WorkerSplitStream(IterableDataset):
    def __init__(self, sampler: DistributedEpochSampler, batch_size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size
        self.shared = torch.multiprocessing.Value("i", -1)  # a Value with its lock, from torch.multiprocessing

    def set_epoch(self, epoch: int) -> None:
        with self.shared.get_lock():
            self.shared.value = epoch
        self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        with self.shared.get_lock():
            epoch = self.shared.value
        if epoch != -1:
            self.sampler.set_epoch(epoch)
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        indices = iter(self.sampler)
        batches = iter(lambda: list(itertools.islice(indices, self.batch_size)), [])
        for batch in itertools.islice(batches, worker, None, workers):
            yield from batch
