"""Exercise 04: a fast `torch.utils.data.DataLoader`: make each sample cheap first, then add workers.

`make_loader(root, batch_size, num_workers)` returns a `DataLoader` over the ImageFolder
tree at `root` (one folder per class) whose batches are `(images, labels)`:
uint8 tensors of shape (N, 3, 224, 224) holding the 256-resize + 224 centre crop of
each image, and int64 labels. The model's float conversion and normalisation are
not the loader's job: they run once per batch, on the device.

Build it in steps; the grader reports each one, so you can stop after any step with
something that passes:
  1. one cheap sample (TODO(ex04, step 1)): `CenterCropDataset(root)[i]`, pixels within 2.0
     levels on average (6.0 at worst) of `loaderlab.images.reference_crop`;
  2. the loader (TODO(ex04, step 2)): batches in file order, every sample once, the last
     partial batch kept, for any batch size and worker count;
  3. workers (TODO(ex04, step 3)): exactly `num_workers` worker processes, a default for None;
  4. shuffle, seeds and augmentation (TODO(ex04, step 4)): shuffled epochs, random flips that
     differ between workers and between epochs, all reproducible for a seed;
  5. bad input: a missing root or an empty class folder raises an error naming it
     (nothing to add if step 1 lists the samples with `list_samples`);
  6. speed: epochs of `make_loader(root, batch_size=64)` against the tutorial
     configuration (`loaderlab.baselines.tutorial_dataloader`): one tutorial loader's
     speed per core free while timing, so 2x on an idle 2-core machine. Steps 1 and 3
     are what make it fast.
Files: Every kind of file the dataset mixes (`data_gen.encodings`: progressive, 4:2:2 and
4:4:4, grayscale, Adobe CMYK and YCCK, EXIF-tagged camera files, a PNG under a .jpg name)
gives the reference's pixels (`loaderlab.images`: read by its content, kept as stored with
no EXIF rotation, grayscale as three equal channels, CMYK as Pillow converts it).
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

    Contract (the grader checks each point):
    - samples in file order: class folders sorted by name (label = position), then
      files sorted by name, as `loaderlab.images.list_samples(root)` lists them
      (it also raises a clear error for a missing root or an empty class folder);
    - the image is the 256-short-side resize + 224 centre crop, in RGB, channels
      first, uint8: within 2.0 levels on average (6.0 for any image) of
      `loaderlab.images.reference_crop`, the large images too: where a decoder
      scales by a power of two, it must keep the crop clear of that scale's
      aliasing (notebook 01 measures it);
    - with `augment`, a horizontal flip with probability 1/2, drawn from a generator
      of the process that loads the sample: each worker process has its own (see
      `seed_worker`), so workers never repeat each other's flips.
    """

    def __init__(self, root: Path | str, augment: bool = False, seed: int = 0) -> None:
        # TODO(ex04, step 1): keep the samples of `root` (class folders in sorted order give the labels),
        # `augment`, and a random generator seeded with `seed` for the flips of step 4.
        raise NotImplementedError("TODO(ex04, step 1) in exercises/ex04_fast_dataloader.py: CenterCropDataset.__init__")

    def __len__(self) -> int:
        # TODO(ex04, step 1): the number of samples.
        raise NotImplementedError("TODO(ex04, step 1) in exercises/ex04_fast_dataloader.py: CenterCropDataset.__len__")

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        # TODO(ex04, step 1): sample `index` as (uint8 CHW tensor, label), made cheaply: this runs once per image
        # per epoch, so every saved millisecond counts. Your exercise-01 crop is the cheap one (decode no more
        # pixels than the resize needs; crop and resize in one step). Keep uint8: a float32 image has four times
        # the bytes to collate and hand over from the workers. With `augment`, pass the crop through random_flip
        # (step 4) with the dataset's generator.
        raise NotImplementedError("TODO(ex04, step 1) in exercises/ex04_fast_dataloader.py: CenterCropDataset.__getitem__")


def make_loader(root: Path | str, batch_size: int = 64, num_workers: int | None = None, *,
                shuffle: bool = False, augment: bool = False, seed: int = 0) -> DataLoader:
    """A DataLoader of (uint8 (N, 3, 224, 224) centre crops, int64 (N,) labels) over the ImageFolder at `root`.

    Contract (the grader checks each point):
    - every sample once per epoch, `batch_size` per batch, the last partial batch kept;
    - file order unless `shuffle`: then each epoch is a full shuffle of the samples
      (not of whole batches or blocks of neighbours, not only inside each batch), a new
      one each epoch, the same sequence of orders for the same `seed` and `num_workers`,
      another for another seed;
    - `num_workers` worker processes, exactly (0: load in this process); None: a default
      between 1 and `usable_cores()` (`default_num_workers`);
    - `augment`: random horizontal flips, different in every worker and in every epoch,
      the same for the same `seed` and `num_workers`, others for another seed;
    - a missing root or an empty class folder raises an error naming it.
    """
    # TODO(ex04, step 2): a DataLoader over CenterCropDataset(root, augment, seed) that keeps the last partial
    # batch, with num_workers passed on unchanged (None alone means default_num_workers()), and `shuffle` with a
    # torch generator seeded by `seed`, so that a seed gives the same orders again.
    raise NotImplementedError("TODO(ex04, step 2) in exercises/ex04_fast_dataloader.py: make_loader")


def default_num_workers() -> int:
    """The worker count for num_workers=None."""
    # TODO(ex04, step 3): decoding is CPU-bound, so the default comes from the cores this process may use
    # (more workers than cores only take turns). Also in make_loader: keep the workers alive between epochs
    # (starting them costs every epoch otherwise), an option that DataLoader accepts only with workers.
    raise NotImplementedError("TODO(ex04, step 3) in exercises/ex04_fast_dataloader.py: default_num_workers")


def random_flip(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The HWC image mirrored left-right with probability 1/2, drawn from `rng`."""
    # TODO(ex04, step 4): toss the coin with `rng`, the generator of the process loading the image: the dataset's
    # own in this process, but in a worker the worker's copy of it, so every worker would toss the same coins if
    # nothing gave each worker a generator of its own (seed_worker does).
    raise NotImplementedError("TODO(ex04, step 4) in exercises/ex04_fast_dataloader.py: random_flip")


def seed_worker(worker_id: int) -> None:
    """worker_init_fn: runs in each worker process the loader starts, before that worker loads anything."""
    # TODO(ex04, step 4): give this worker's copy of the dataset a generator of its own, seeded from the seed
    # PyTorch gives this worker (get_worker_info(): the loader's base seed + the worker id). The base seed comes
    # from the loader's generator each time the loader starts its workers: once per loader with persistent workers
    # (this function then runs once per worker, and its generator goes on from epoch to epoch), once per epoch
    # without them. So flips differ between workers and between epochs, and a seeded loader repeats them.
    # Then have make_loader pass this function as the DataLoader's worker_init_fn.
    raise NotImplementedError("TODO(ex04, step 4) in exercises/ex04_fast_dataloader.py: seed_worker")
