"""Exercise 04: a fast `torch.utils.data.DataLoader`: make each sample cheap first, then add workers.

`make_loader(root, batch_size, num_workers)` returns a `DataLoader` over the ImageFolder
tree at `root` (one folder per class) whose batches are `(images, labels)`:
uint8 tensors of shape (N, 3, 224, 224) holding the 256-resize + 224 centre crop of
each image, and int64 labels. The model's float conversion and normalisation are
not the loader's job: they run once per batch, on the device.

The grader checks the pixels against a reference decode (2.0 levels on average,
6.0 at worst), every sample once per epoch, that `num_workers` really starts that
many worker processes, that random flips differ between workers, and that bad
folders raise clear errors; then it times your loader against the tutorial
configuration (`loaderlab.baselines.tutorial_dataloader`): the target is 2x.
Grade: `pytest grader/test_ex04_fast_dataloader.py`. Hints: `make hint EX=ex04`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch  # noqa: F401  (you will need these)
from torch.utils.data import DataLoader, Dataset, get_worker_info  # noqa: F401

from loaderlab.images import CROP, RESIZE, list_samples  # noqa: F401
from loaderlab.machine import usable_cores  # noqa: F401


class CenterCropDataset(Dataset):
    """An ImageFolder tree as `(uint8 (3, 224, 224) tensor, int label)` samples, optionally flipped at random.

    Contract (the grader checks each point through `make_loader`):
    - samples in file order: class folders sorted by name (label = position), then
      files sorted by name, as `loaderlab.images.list_samples(root)` lists them
      (it also raises a clear error for a missing root or an empty class folder);
    - the image is the 256-short-side resize + 224 centre crop, in RGB, channels
      first, uint8: within 2.0 levels on average of `loaderlab.images.reference_crop`;
    - with `augment`, a horizontal flip with probability 1/2, drawn from a generator
      that is different in every worker (see `seed_worker`).
    """

    def __init__(self, root: Path | str, augment: bool = False, seed: int = 0) -> None:
        # TODO(ex04a): list the samples (list_samples), keep `augment`, and make a
        # generator for num_workers=0: np.random.default_rng(seed). Careful: every
        # worker gets a COPY of this object, generator state included.
        raise NotImplementedError("TODO(ex04a) in exercises/ex04_fast_dataloader.py: CenterCropDataset.__init__")

    def __len__(self) -> int:
        # TODO(ex04b): the number of samples.
        raise NotImplementedError("TODO(ex04b) in exercises/ex04_fast_dataloader.py: CenterCropDataset.__len__")

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        # TODO(ex04c): decode sample `index` cheaply: Image.open, image.draft("RGB", size)
        # so a large JPEG decodes at 1/2 or 1/4 scale, then ONE image.resize((224, 224),
        # Image.BILINEAR, box=crop_box) for crop and resize together (your exercise 01
        # did this). Keep uint8 (no ToTensor: it makes float32). Flip with
        # image[:, ::-1] if augmenting and self.rng.random() < 0.5. Return
        # (torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label).
        raise NotImplementedError("TODO(ex04c) in exercises/ex04_fast_dataloader.py: CenterCropDataset.__getitem__")


def seed_worker(worker_id: int) -> None:
    """worker_init_fn: runs once in each worker process, before it loads anything."""
    # TODO(ex04d): give this worker's copy of the dataset its own generator:
    # info = get_worker_info(); info.dataset.rng = np.random.default_rng(info.seed).
    # info.seed is the loader's base seed + worker_id: different in every worker and
    # every epoch, and reproducible when the DataLoader has a seeded generator.
    raise NotImplementedError("TODO(ex04d) in exercises/ex04_fast_dataloader.py: seed_worker")


def make_loader(root: Path | str, batch_size: int = 64, num_workers: int | None = None, *,
                shuffle: bool = False, augment: bool = False, seed: int = 0) -> DataLoader:
    """A DataLoader of (uint8 (N, 3, 224, 224) centre crops, int64 (N,) labels) over the ImageFolder at `root`.

    - every sample once per epoch, the last partial batch kept (no drop_last);
    - file order unless `shuffle`: then a new order each epoch, and the same
      orders again for the same `seed`;
    - `num_workers` worker processes, exactly; None: a default from
      `usable_cores()` (decoding is CPU-bound); 0: load in this process;
    - `augment`: random horizontal flips, different in every worker, reproducible
      for a `seed` and `num_workers`.
    """
    # TODO(ex04e): build CenterCropDataset(root, augment, seed) and return
    # DataLoader(dataset, batch_size=..., shuffle=..., num_workers=...,
    #            generator=torch.Generator().manual_seed(seed), worker_init_fn=seed_worker).
    # Then tune it from your notebook-04 figures: persistent_workers=True (with
    # workers) saves their start-up every epoch; pin_memory only helps with a GPU.
    raise NotImplementedError("TODO(ex04e) in exercises/ex04_fast_dataloader.py: make_loader")
