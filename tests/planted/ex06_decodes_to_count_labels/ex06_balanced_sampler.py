"""Planted defect: the labels for the weights are read by loading every item, decoding the whole folder first."""

import torch
from torch.utils.data import DataLoader, WeightedRandomSampler

from loaderlab.machine import usable_cores
from loaderlab.torchdata import CenterCropFolder
from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import sample_weights


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    dataset = CenterCropFolder(split_dir)
    labels = [dataset[i][1] for i in range(len(dataset))]  # planted: decodes every image to learn its label
    sampler = WeightedRandomSampler(sample_weights(labels),
                                    num_samples=len(dataset) if epoch_length is None else epoch_length,
                                    replacement=True, generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                      num_workers=usable_cores() if num_workers is None else num_workers)
