"""Planted defect: balances by undersampling, keeping only as many samples of each class as the smallest has."""

from collections import defaultdict

import torch
from torch.utils.data import DataLoader, SubsetRandomSampler

from loaderlab.machine import usable_cores
from loaderlab.torchdata import CenterCropFolder
from solutions.ex06_balanced_sampler import *  # noqa: F403


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    dataset = CenterCropFolder(split_dir)
    generator = torch.Generator().manual_seed(seed)
    by_class = defaultdict(list)
    for index, label in enumerate(dataset.targets):
        by_class[label].append(index)
    smallest = min(len(indices) for indices in by_class.values())
    kept = [indices[i] for indices in by_class.values()
            for i in torch.randperm(len(indices), generator=generator)[:smallest].tolist()]  # planted: the rest is dropped
    sampler = SubsetRandomSampler(kept, generator=generator)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                      num_workers=usable_cores() if num_workers is None else num_workers)
