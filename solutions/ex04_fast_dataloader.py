"""Exercise 04, reference solution: a DataLoader that makes each sample cheap, then adds workers.

- each sample is exercise 01's fast crop (JPEG draft mode + one-call crop-resize), kept uint8;
  conversion to float and normalisation belong to the device, once per batch;
- one worker process per usable core by default, kept alive across epochs (persistent_workers);
- flips draw from a generator per process: the dataset's own in this process (num_workers=0), and
  in each worker one that `seed_worker` makes from `get_worker_info().seed`. That seed is the
  loader's base seed + the worker's id, and the base seed is drawn from the loader's seeded
  generator each time the loader starts its workers: once per loader with persistent workers
  (then `seed_worker` runs once per worker, and its generator simply continues from one epoch to
  the next), once per epoch without them. Either way workers never repeat each other's draws,
  epochs differ, and a `seed` reproduces a run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from loaderlab.images import list_samples
from loaderlab.machine import usable_cores
from solutions.ex01_profile_and_fix import fast_center_crop

WORKER_TIMEOUT_S = 120.0  # a worker silent for this long is an error, not a reason to wait forever


class CenterCropDataset(Dataset):
    """An ImageFolder tree as (uint8 (3, 224, 224) centre crop, label) samples, optionally flipped at random."""

    def __init__(self, root: Path | str, augment: bool = False, seed: int = 0) -> None:
        self.samples = list_samples(root)  # raises FileNotFoundError naming a missing root or an empty class
        self.augment = augment
        # This process's generator (num_workers=0). Every worker gets a copy of it, so seed_worker replaces the copy.
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = fast_center_crop(path)
        if self.augment:
            image = random_flip(image, self.rng)
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label


def make_loader(root: Path | str, batch_size: int = 64, num_workers: int | None = None, *,
                shuffle: bool = False, augment: bool = False, seed: int = 0) -> DataLoader:
    """A DataLoader of (uint8 (N, 3, 224, 224) centre crops, int64 (N,) labels) over the ImageFolder at `root`.

    Every sample once per epoch, the last partial batch kept; file order unless `shuffle`
    (a new order each epoch, the same sequence of orders for the same `seed` and `num_workers`).
    `augment` flips half the images horizontally at random, reproducibly for a `seed` and `num_workers`.
    `num_workers=None` means one per usable core; 0 loads in this process.
    """
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment=augment, seed=seed), batch_size, workers, shuffle, seed)


def default_num_workers() -> int:
    """One worker per usable core: decoding is CPU-bound, so more workers only take turns."""
    return usable_cores()


def random_flip(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The HWC image mirrored left-right with probability 1/2, drawn from `rng`."""
    return image[:, ::-1] if rng.random() < 0.5 else image


def seed_worker(worker_id: int) -> None:
    """worker_init_fn, run once in each worker process as the loader starts it: give this worker's copy of the
    dataset its own generator, from the seed PyTorch gives the worker (the loader's base seed + worker id)."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def loader_for(dataset: Dataset, batch_size: int, num_workers: int, shuffle: bool, seed: int,
               **options: object) -> DataLoader:
    """The DataLoader settings of `make_loader` for any dataset; `options` override them.

    DataLoader itself rejects batch_size < 1 and num_workers < 0 with a ValueError.
    """
    settings: dict[str, object] = {"generator": torch.Generator().manual_seed(seed), "worker_init_fn": seed_worker,
                                   "pin_memory": torch.cuda.is_available()}
    if num_workers > 0:  # both options are for worker processes only: DataLoader refuses them with num_workers=0
        settings |= {"persistent_workers": True, "timeout": WORKER_TIMEOUT_S}
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers, **(settings | options))
