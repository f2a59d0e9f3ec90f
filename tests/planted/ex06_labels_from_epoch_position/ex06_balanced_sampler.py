"""Planted defect: each epoch is drawn up front and served by a view whose item i is the drawn sample's image, but
the label of sample i (the position in the epoch), not of the sample drawn there."""

import torch
from torch.utils.data import DataLoader, Dataset

from loaderlab.machine import usable_cores
from loaderlab.torchdata import CenterCropFolder
from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import sample_weights


class DrawnEpoch(Dataset):
    def __init__(self, dataset, drawn):
        self.dataset, self.drawn = dataset, drawn
        self.targets = dataset.targets

    def __len__(self):
        return len(self.drawn)

    def __getitem__(self, position):
        image, _ = self.dataset[self.drawn[position]]
        return image, self.targets[position]  # planted: the label at the position, not of the sample drawn there


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    dataset = CenterCropFolder(split_dir)
    length = len(dataset) if epoch_length is None else epoch_length
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.multinomial(sample_weights(dataset.targets), length, replacement=True, generator=generator).tolist()
    return DataLoader(DrawnEpoch(dataset, drawn), batch_size=batch_size,
                      num_workers=usable_cores() if num_workers is None else num_workers)
