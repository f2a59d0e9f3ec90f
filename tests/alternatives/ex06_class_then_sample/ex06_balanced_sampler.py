"""Exercise 06, another route: pick a class, then a sample in it; a batch sampler that yields whole batches."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from loaderlab.machine import usable_cores
from loaderlab.torchdata import CenterCropFolder

IMBALANCE = 10


def sample_weights(labels: Sequence[int]) -> torch.Tensor:
    """One weight per sample, 1 / (samples in its class)."""
    labels = np.asarray(labels)
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    return torch.from_numpy(1.0 / counts[inverse])


class ClassThenSample(Sampler[list[int]]):
    """Batches of indices: each draw picks a class uniformly, then one of its samples uniformly."""

    def __init__(self, targets: Sequence[int], length: int, batch_size: int, seed: int) -> None:
        if length < 1:
            raise ValueError(f"epoch_length must be 1 or more, got {length}")
        members: dict[int, list[int]] = defaultdict(list)
        for index, label in enumerate(targets):
            members[label].append(index)
        self.members = [np.array(indices) for _, indices in sorted(members.items())]
        self.length, self.batch_size = length, batch_size
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return -(-self.length // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        classes = self.rng.integers(len(self.members), size=self.length)
        drawn = [int(self.members[c][self.rng.integers(len(self.members[c]))]) for c in classes]
        for start in range(0, self.length, self.batch_size):
            yield drawn[start:start + self.batch_size]


def make_balanced_loader(split_dir: Path | str, batch_size: int, num_workers: int | None = None, seed: int = 0,
                         epoch_length: int | None = None) -> DataLoader:
    """A DataLoader over CenterCropFolder(split_dir) whose classes come out equally often."""
    dataset = CenterCropFolder(split_dir)
    batches = ClassThenSample(dataset.targets, len(dataset) if epoch_length is None else epoch_length, batch_size, seed)
    workers = usable_cores() if num_workers is None else num_workers
    return DataLoader(dataset, batch_sampler=batches, num_workers=workers, persistent_workers=workers > 0)
