"""Exercise 12, reference solution: exact epochs over `world_size` ranks.

- one permutation per epoch, drawn from a generator seeded with `seed + epoch`: every rank draws the same
  one without talking to the others, and `set_epoch` gives each epoch its own;
- evaluation splits range(N) itself, `rank::world_size`, with no padding: every sample is scored exactly
  once, and ranks differ by at most one sample (`exact_mean` therefore sums and counts, never averages means);
- training drops the epoch's last N % world_size samples of the permutation (TRAINING_POLICY = "drop"),
  so every rank yields N // world_size samples and runs the same number of steps; the dropped samples
  change with the permutation, so none is left out for good;
- `WorkerSplitStream` hands batch i of the rank's epoch to DataLoader worker i % workers, so the
  DataLoader's round-robin over workers gives back the sampler's order for any number of workers; its
  `set_epoch` also writes the epoch into a value in shared memory, which every pass reads first, so workers
  that persist across epochs (each holding the copy of the stream it started with) follow it too.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, Sampler, get_worker_info

from loaderlab.distributed import collective_device

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
        kept = len(self) * self.world_size
        return iter(order[self.rank:kept:self.world_size])

    def __len__(self) -> int:
        if self.training:
            return self.dataset_size // self.world_size
        return len(range(self.rank, self.dataset_size, self.world_size))


def exact_mean(scores: Sequence[float]) -> float:
    """The mean of every rank's scores together, returned on every rank: all_reduce of (sum, count)."""
    # on the device the group's backend reduces: the CPU under gloo, the rank's GPU under NCCL (no CPU collectives)
    totals = torch.tensor([float(sum(scores)), float(len(scores))], dtype=torch.float64, device=collective_device())
    dist.all_reduce(totals)
    total, count = totals.tolist()
    if count == 0:
        raise ValueError("no rank had any score: the mean of nothing is undefined")
    return total / count


class WorkerSplitStream(IterableDataset):
    """The sampler's indices for a DataLoader of `batch_size`, split among its workers by whole batches."""

    def __init__(self, sampler: DistributedEpochSampler, batch_size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size
        # Shared with the workers when they start (the stream travels to them in their start-up arguments): -1
        # until set_epoch is called, so a sampler whose epoch was set directly keeps it.
        self.epoch = multiprocessing.RawValue("q", -1)

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next pass, in this process and in workers that already hold their copy."""
        self.sampler.set_epoch(epoch)
        self.epoch.value = epoch

    def __iter__(self) -> Iterator[int]:
        if self.epoch.value >= 0:
            self.sampler.set_epoch(self.epoch.value)
        worker = get_worker_info()
        worker_id, workers = (0, 1) if worker is None else (worker.id, worker.num_workers)
        indices = list(self.sampler)
        for batch, start in enumerate(range(0, len(indices), self.batch_size)):
            if batch % workers == worker_id:
                yield from indices[start:start + self.batch_size]
