"""Planted defect: the sampler re-seeds its generator at the start of every epoch, so every epoch is the same."""

import torch
from torch.utils.data import WeightedRandomSampler

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest


class ReseededSampler(WeightedRandomSampler):
    def __init__(self, weights, num_samples, seed):
        super().__init__(weights, num_samples, replacement=True)
        self.seed = seed

    def __iter__(self):
        self.generator = torch.Generator().manual_seed(self.seed)  # planted: a fresh generator every epoch
        return super().__iter__()


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    loader = _honest(split_dir, batch_size, num_workers, seed, epoch_length)
    sampler = ReseededSampler(loader.sampler.weights, loader.sampler.num_samples, seed)
    return torch.utils.data.DataLoader(loader.dataset, batch_size=batch_size, sampler=sampler,
                                       num_workers=loader.num_workers)
