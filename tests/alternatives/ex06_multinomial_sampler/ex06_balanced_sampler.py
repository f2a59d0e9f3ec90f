"""Exercise 06, another route: a sampler of its own on torch.multinomial, weights from torch.unique."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Sampler

from loaderlab.machine import usable_cores
from loaderlab.torchdata import CenterCropFolder

IMBALANCE = 10


def sample_weights(labels: Sequence[int]) -> torch.Tensor:
    """One weight per sample, 1 / (samples in its class)."""
    _, inverse, counts = torch.unique(torch.as_tensor(list(labels)), return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse].double()


class BalancedSampler(Sampler[int]):
    """`length` indices per epoch, drawn with replacement in proportion to `weights`, from a generator seeded once."""

    def __init__(self, weights: torch.Tensor, length: int, seed: int) -> None:
        if length < 1:
            raise ValueError(f"an epoch needs at least one sample, got epoch_length={length}")
        self.weights, self.length = weights, length
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[int]:
        return iter(torch.multinomial(self.weights, self.length, replacement=True, generator=self.generator).tolist())


def make_balanced_loader(split_dir: Path | str, batch_size: int, num_workers: int | None = None, seed: int = 0,
                         epoch_length: int | None = None) -> DataLoader:
    """A DataLoader over CenterCropFolder(split_dir) whose classes come out equally often."""
    dataset = CenterCropFolder(split_dir)
    sampler = BalancedSampler(sample_weights(dataset.targets),
                              len(dataset) if epoch_length is None else epoch_length, seed)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                      num_workers=usable_cores() if num_workers is None else num_workers)
