"""Exercise 06, reference solution: class balance by weighted sampling, at the unbalanced loader's speed.

- weights come from the labels alone (`CenterCropFolder.targets`), never from decoding images;
- `WeightedRandomSampler` draws `epoch_length` indices with replacement, so an epoch keeps its length
  and small classes are repeated rather than large ones dropped (without replacement it could draw
  no more than the dataset holds, and an epoch of the dataset's size would keep its imbalance);
- the sampler owns a generator seeded once: the same seed gives the same epochs, and each new epoch
  continues that generator, so epochs differ;
- the decoding runs in one worker process per usable core, as in the unbalanced loader.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch
from torch.utils.data import DataLoader, WeightedRandomSampler

from loaderlab.machine import usable_cores
from loaderlab.torchdata import CenterCropFolder

IMBALANCE = 10  # graded on dataset_dir(imbalance=IMBALANCE) / "train", which `make data` makes (--imbalance 10)


def sample_weights(labels: Sequence[int]) -> torch.Tensor:
    """One weight per sample, 1 / (samples in its class): every class then carries the same total weight."""
    counts = Counter(labels)
    return torch.tensor([1.0 / counts[label] for label in labels], dtype=torch.double)


def make_balanced_loader(split_dir: Path | str, batch_size: int, num_workers: int | None = None, seed: int = 0,
                         epoch_length: int | None = None) -> DataLoader:
    """A DataLoader over `CenterCropFolder(split_dir)` whose classes come out equally often.

    Yields `(uint8 (N, 3, 224, 224), int64 (N,))` batches; an epoch is `epoch_length`
    samples (default: the dataset's size), the last partial batch kept. `num_workers=None`
    means one worker process per usable core. WeightedRandomSampler refuses an epoch_length
    below 1 with a ValueError.
    """
    dataset = CenterCropFolder(split_dir)
    sampler = WeightedRandomSampler(
        sample_weights(dataset.targets),
        num_samples=len(dataset) if epoch_length is None else epoch_length,
        replacement=True,
        generator=torch.Generator().manual_seed(seed),
    )
    workers = usable_cores() if num_workers is None else num_workers
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers)
