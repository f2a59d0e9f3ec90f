"""Planted defect: the sampler's generator is seeded with a constant, so every seed gives the same epochs."""

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest

SAMPLER_SEED = 0


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    return _honest(split_dir, batch_size, num_workers, SAMPLER_SEED, epoch_length)  # planted: `seed` ignored
