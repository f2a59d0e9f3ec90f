"""Planted defect: drop_last=True, so the last partial batch of every epoch is lost."""

from torch.utils.data import DataLoader

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    loader = _honest(split_dir, batch_size, num_workers, seed, epoch_length)
    return DataLoader(loader.dataset, batch_size=batch_size, sampler=loader.sampler, num_workers=loader.num_workers,
                      drop_last=True)  # planted
