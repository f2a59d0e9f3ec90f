"""Exercise 12, a correct alternative: training pads as DistributedSampler does (TRAINING_POLICY = "pad"): every
rank yields ceil(N / world_size) indices, the epoch's permutation extended by its own first indices."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, Sampler, get_worker_info

TRAINING_POLICY = "pad"


class DistributedEpochSampler(Sampler[int]):
    def __init__(self, dataset_size: int, world_size: int, rank: int, training: bool, seed: int = 0) -> None:
        if world_size < 1 or not 0 <= rank < world_size or dataset_size < 0:
            raise ValueError(f"impossible split: dataset_size={dataset_size}, world_size={world_size}, rank={rank}")
        self.dataset_size, self.world_size, self.rank = dataset_size, world_size, rank
        self.training, self.seed, self.epoch = training, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.training:
            return iter(range(self.rank, self.dataset_size, self.world_size))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.dataset_size, generator=generator).tolist()
        total = len(self) * self.world_size
        while order and len(order) < total:
            order += order[:total - len(order)]
        return iter(order[self.rank:total:self.world_size])

    def __len__(self) -> int:
        if self.training:
            return math.ceil(self.dataset_size / self.world_size)
        return len(range(self.rank, self.dataset_size, self.world_size))


def exact_mean(scores: Sequence[float]) -> float:
    totals = torch.tensor([float(sum(scores)), float(len(scores))], dtype=torch.float64)
    dist.all_reduce(totals)
    return float(totals[0] / totals[1])


class WorkerSplitStream(IterableDataset):
    def __init__(self, sampler: DistributedEpochSampler, batch_size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size
        self.epoch = torch.full((1,), -1, dtype=torch.int64).share_memory_()  # a tensor in shared memory

    def set_epoch(self, epoch: int) -> None:
        self.epoch.fill_(epoch)
        self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        if int(self.epoch.item()) >= 0:
            self.sampler.set_epoch(int(self.epoch.item()))
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        indices = list(self.sampler)
        batches = [indices[start:start + self.batch_size] for start in range(0, len(indices), self.batch_size)]
        for batch in batches[worker::workers]:
            yield from batch
