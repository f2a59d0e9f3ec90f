"""Exercise 06: class balance without losing throughput.

The imbalanced dataset (`make data` makes it: `python -m data_gen --profile workshop
--imbalance 10`, and `--profile ci` for the ci profile) has ten times more images of
class 0 than of class 9: a model trained on it epoch after epoch learns the frequencies
as much as the pictures. You build a `DataLoader` whose batches show every class
equally often, by weighting samples in the sampler (no image is dropped, none is copied
on disk), and that loads as fast as the plain shuffled loader over the same folder.

The dataset is given: `loaderlab.torchdata.CenterCropFolder(split_dir)` yields
`(uint8 (3, 224, 224) tensor, label)` items, and its `targets` list holds every
label in index order, without decoding anything.

Build it in steps; the grader reports each one:
  1. weights (TODO(ex06, step 1)): one weight per sample;
  2. balanced epochs (TODO(ex06, step 2)): the loader's batches, epoch length, class
     frequencies and seeding;
  3. bad input: a missing folder or an epoch_length below 1 is refused (graded on
     what step 2 built);
  4. speed: against a plain shuffled DataLoader with the same workers.
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

IMBALANCE = 10  # graded on dataset_dir(imbalance=IMBALANCE) / "train", which `make data` makes (--imbalance 10)


def sample_weights(labels: Sequence[int]) -> torch.Tensor:
    """One weight per SAMPLE (a 1-D tensor of len(labels) floats): 1 / (number of samples in its class).

    Every class then carries the same total weight, so a sampler drawing in
    proportion to these weights draws each class equally often. Any labels work,
    in any order: [0, 0, 0, 1] -> [1/3, 1/3, 1/3, 1]; [7, 3, 7] -> [1/2, 1, 1/2].
    """
    # TODO(ex06, step 1): count the samples of each class, then give every sample the inverse of its class's
    # count, as floating-point numbers.
    raise NotImplementedError("TODO(ex06, step 1) in exercises/ex06_balanced_sampler.py: sample_weights")


def make_balanced_loader(split_dir: Path | str, batch_size: int, num_workers: int | None = None, seed: int = 0,
                         epoch_length: int | None = None) -> DataLoader:
    """A `torch.utils.data.DataLoader` over `CenterCropFolder(split_dir)` whose classes come out equally often.

    Contract (the grader checks each point):
    - batches of `(images uint8 (N, 3, 224, 224), labels int64 (N,))`, each label
      the class of the image it comes with; `batch_size` per batch, the last
      partial batch kept;
    - an epoch is exactly `epoch_length` samples (None: the dataset's size; below 1:
      ValueError). Small classes are drawn more than once (with replacement, at every
      epoch length, the default one included); large ones are never dropped to even
      things out;
    - over epochs of any length, each class comes out with frequency 1/C (C classes),
      up to the randomness of sampling (the grader pools enough draws for a tolerance
      of 4 standard deviations), and every sample can be drawn;
    - `seed` makes it reproducible: the same seed gives the same epochs, another
      seed other epochs, and two epochs of one loader draw different samples;
    - the returned loader's `batch_sampler` yields the index lists it loads (the
      grader reads indices there, and labels in `loader.dataset.targets`,
      to count long epochs without decoding);
    - a missing folder raises an error naming it;
    - throughput: at least 0.8x a plain shuffled DataLoader over the same folder
      with one worker process per usable core (`num_workers=None` means that many).
    """
    # TODO(ex06, step 2): over the given dataset, a sampler that draws each epoch's indices in proportion to
    # sample_weights of the dataset's targets (read the labels there: decoding every image to learn its label
    # would cost a whole epoch before the first batch), with replacement, from a generator of its own seeded once
    # with `seed`; then a DataLoader that loads what it draws with the asked batch size and worker processes.
    raise NotImplementedError("TODO(ex06, step 2) in exercises/ex06_balanced_sampler.py: make_balanced_loader")
