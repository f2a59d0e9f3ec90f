"""Exercise 04, another route: torchvision's ImageFolder with a cheap loader, Python's random for flips, and a
sampler of its own.

- ImageFolder lists the classes and files in the same order as list_samples and names a missing root
  or an empty class in its errors; its `loader` is the exercise-01 fast crop;
- flips draw from Python's `random` module, which the DataLoader seeds in every worker (base seed +
  worker id); in this process (num_workers=0) they draw from a random.Random(seed) of the dataset's;
- shuffle=True uses a sampler that draws a full torch.randperm each epoch from its own seeded generator.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler, get_worker_info
from torchvision import datasets

from loaderlab.machine import usable_cores
from solutions.ex01_profile_and_fix import fast_center_crop


class CenterCropDataset(datasets.ImageFolder):
    """An ImageFolder tree as (uint8 (3, 224, 224) centre crop, label) samples, optionally flipped at random."""

    def __init__(self, root: Path | str, augment: bool = False, seed: int = 0) -> None:
        super().__init__(str(root), loader=fast_center_crop)
        self.augment = augment
        self.local_random = random.Random(seed)  # this process's; workers use the module, seeded by the DataLoader

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image, label = super().__getitem__(index)
        draw = random.random if get_worker_info() is not None else self.local_random.random
        if self.augment and draw() < 0.5:
            image = image[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label


class EpochShuffle(Sampler[int]):
    """A new full permutation of range(size) each epoch, from a generator seeded once."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randperm(self.size, generator=self.generator).tolist())


def make_loader(root: Path | str, batch_size: int = 64, num_workers: int | None = None, *,
                shuffle: bool = False, augment: bool = False, seed: int = 0) -> DataLoader:
    """A DataLoader of (uint8 (N, 3, 224, 224) centre crops, int64 (N,) labels) over the ImageFolder at `root`."""
    dataset = CenterCropDataset(root, augment, seed)
    workers = usable_cores() if num_workers is None else num_workers
    extra = {"persistent_workers": True, "timeout": 120.0} if workers > 0 else {}
    return DataLoader(dataset, batch_size=batch_size, sampler=EpochShuffle(len(dataset), seed) if shuffle else None,
                      num_workers=workers, generator=torch.Generator().manual_seed(seed), **extra)
