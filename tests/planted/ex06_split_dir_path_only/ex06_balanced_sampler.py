"""Planted defect: make_balanced_loader takes split_dir for a Path (`split_dir.is_dir()`), so a str, which the
contract promises too, raises AttributeError."""

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    if not split_dir.is_dir():  # planted: a str has no is_dir()
        raise FileNotFoundError(f"no ImageFolder split at {split_dir}")
    return _honest(split_dir, batch_size, num_workers, seed, epoch_length)
