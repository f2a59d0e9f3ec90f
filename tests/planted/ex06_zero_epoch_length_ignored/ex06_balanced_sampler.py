"""Planted defect: `epoch_length or len(dataset)` turns epoch_length=0 into a full epoch instead of an error."""

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    return _honest(split_dir, batch_size, num_workers, seed, epoch_length or None)  # planted: 0 is falsy
