"""Planted defect: the weighted sampler draws without replacement."""

import torch
from torch.utils.data import DataLoader, WeightedRandomSampler

from loaderlab.machine import usable_cores
from loaderlab.torchdata import CenterCropFolder
from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import sample_weights


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    dataset = CenterCropFolder(split_dir)
    sampler = WeightedRandomSampler(sample_weights(dataset.targets),
                                    num_samples=len(dataset) if epoch_length is None else epoch_length,
                                    replacement=False,  # planted
                                    generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                      num_workers=usable_cores() if num_workers is None else num_workers)
