"""Exercise 06: class balance without losing throughput.

The imbalanced dataset (`python -m data_gen --profile ci --imbalance 10`) has ten
times more images of class 0 than of class 9: a model trained on it epoch after
epoch learns the frequencies as much as the pictures. You build a `DataLoader`
whose batches show every class equally often, by weighting samples in the
sampler (no image is dropped, none is copied on disk), and that loads as fast as
the plain shuffled loader over the same folder.

The dataset is given: `loaderlab.torchdata.CenterCropFolder(split_dir)` yields
`(uint8 (3, 224, 224) tensor, label)` items, and its `targets` list holds every
label in index order, without decoding anything.
Grade: `pytest grader/test_ex06_balanced_sampler.py`. Hints: `make hint EX=ex06`.
"""

from __future__ import annotations

from collections import Counter  # noqa: F401  (you will need these)
from collections.abc import Sequence
from pathlib import Path

import torch
from torch.utils.data import DataLoader, WeightedRandomSampler  # noqa: F401

from loaderlab.machine import usable_cores  # noqa: F401
from loaderlab.torchdata import CenterCropFolder  # noqa: F401

IMBALANCE = 10  # graded on dataset_dir(imbalance=IMBALANCE) / "train" (`python -m data_gen --profile ci --imbalance 10`)


def sample_weights(labels: Sequence[int]) -> torch.Tensor:
    """One weight per SAMPLE (a 1-D tensor of len(labels) floats): 1 / (number of samples in its class).

    Every class then carries the same total weight, so a sampler drawing in
    proportion to these weights draws each class equally often. Example:
    labels [0, 0, 0, 1] -> [1/3, 1/3, 1/3, 1].
    """
    # TODO(ex06a): count the samples of each class (collections.Counter), then give
    # every sample 1 / count[its label]; return torch.tensor(..., dtype=torch.double).
    raise NotImplementedError("TODO(ex06a) in exercises/ex06_balanced_sampler.py: sample_weights")


def make_balanced_loader(split_dir: Path | str, batch_size: int, num_workers: int | None = None, seed: int = 0,
                         epoch_length: int | None = None) -> DataLoader:
    """A `torch.utils.data.DataLoader` over `CenterCropFolder(split_dir)` whose classes come out equally often.

    Contract (the grader checks each point):
    - batches of `(images uint8 (N, 3, 224, 224), labels int64 (N,))`, each label
      the class of the image it comes with; `batch_size` per batch, the last
      partial batch kept;
    - an epoch is exactly `epoch_length` samples (None: the dataset's size). Small
      classes are drawn more than once (with replacement); large ones are never
      dropped to even things out;
    - over an epoch each class comes out with frequency 1/C (C classes), up to the
      randomness of sampling (the grader allows 4 standard deviations), and every
      sample can be drawn;
    - `seed` makes it reproducible: the same seed gives the same epochs, another
      seed other epochs, and two epochs of one loader draw different samples;
    - the returned loader's `batch_sampler` yields the index lists it loads (the
      grader reads indices there, and labels in `loader.dataset.targets`,
      to count long epochs without decoding);
    - throughput: at least 0.9x a plain shuffled DataLoader over the same folder
      with one worker process per usable core (`num_workers=None` means that many).
    """
    # TODO(ex06b): dataset = CenterCropFolder(split_dir); weights from dataset.targets
    # (never decode images just to learn their labels); a WeightedRandomSampler with
    # num_samples, replacement=True and its own seeded torch.Generator; then a
    # DataLoader(dataset, batch_size=..., sampler=..., num_workers=...).
    raise NotImplementedError("TODO(ex06b) in exercises/ex06_balanced_sampler.py: make_balanced_loader")
