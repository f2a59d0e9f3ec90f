"""Planted defect: num_workers=None is taken as 0, so every image is decoded in the main process."""

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    return _honest(split_dir, batch_size, num_workers or 0, seed, epoch_length)  # planted: None -> 0 workers
