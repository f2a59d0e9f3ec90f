"""Tiny datasets that show how DataLoader workers behave, and how they go wrong (notebook 04).

They live in a .py module, not in notebook cells, so that workers started with spawn
(macOS, Windows) can import them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np
import psutil
import torch
from torch.utils.data import Dataset, get_worker_info

from loaderlab.device import mean_std_on


class WhoLoadsWhat(Dataset):
    """Item i is (i, worker id, process id): which worker loaded which sample (-1: the main process)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[int, int, int]:
        info = get_worker_info()
        return index, -1 if info is None else info.id, os.getpid()


class SharedGenerator(Dataset):
    """The classic bug: a numpy generator made in __init__, so every worker starts from a copy of one state.

    Item i is a random draw in [0, 1000): an augmentation's coin flip, in miniature.
    """

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size = size
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return int(self.rng.integers(1000))


def reseed_worker(worker_id: int) -> None:
    """worker_init_fn fixing SharedGenerator: a generator per worker, from the seed PyTorch gives that worker."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


class Sleepy(Dataset):
    """Each item takes `seconds`: a stand-in for a stuck network read."""

    def __init__(self, size: int, seconds: float) -> None:
        self.size, self.seconds = size, seconds

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        time.sleep(self.seconds)
        return index


class TouchEverything(Dataset):
    """Holds `values` (a Python list or a NumPy array); item i reads a slice of it and returns the
    worker's unique memory (USS, bytes) afterwards. Reading a Python object writes its reference count,
    so a forked worker copies every page of a list it reads ("copy-on-read"); an array's numbers are not objects."""

    def __init__(self, values: list[int] | np.ndarray, items: int) -> None:
        self.values, self.items = values, items

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int) -> int:
        step = len(self.values) // self.items
        chunk = self.values[index * step:(index + 1) * step]
        total = sum(chunk) if isinstance(chunk, list) else int(chunk.sum())
        del total
        return psutil.Process().memory_full_info().uss


def uint8_to_normalised(images: torch.Tensor, mean: Sequence[float] | np.ndarray,
                        std: Sequence[float] | np.ndarray) -> torch.Tensor:
    """A uint8 (N, 3, H, W) batch to normalised float32, in one batched operation on the batch's own device
    (mean and std made there once, `mean_std_on`, not for every batch)."""
    mean_t, std_t = mean_std_on(images.device, mean, std)
    return (images.float() / 255 - mean_t) / std_t


class WorkerSeeds(Dataset):
    """Item i is (i, worker id, process id, `get_worker_info().seed`, a coin flip from `self.rng`):
    which process loaded a sample, with which seed, and the "augmentation" it drew."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size = size
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[int, int, int, int, int]:
        info = get_worker_info()
        worker, seed = (-1, -1) if info is None else (info.id, info.seed)
        return index, worker, os.getpid(), seed, int(self.rng.random() < 0.5)
