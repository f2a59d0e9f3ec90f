"""Planted defect: shuffle=True shuffles blocks of 16 neighbouring samples (kind to the disk), not the samples."""

import torch
from torch.utils.data import Sampler

from solutions.ex04_fast_dataloader import CenterCropDataset, default_num_workers, loader_for, seed_worker  # noqa: F401

BLOCK = 16


class BlockShuffle(Sampler[int]):
    def __init__(self, size: int, generator: torch.Generator) -> None:
        self.size, self.generator = size, generator

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        starts = list(range(0, self.size, BLOCK))
        for block in torch.randperm(len(starts), generator=self.generator).tolist():  # planted: whole blocks
            yield from range(starts[block], min(starts[block] + BLOCK, self.size))


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    dataset = CenterCropDataset(root, augment, seed)
    if not shuffle:
        return loader_for(dataset, batch_size, workers, False, seed)
    sampler = BlockShuffle(len(dataset), torch.Generator().manual_seed(seed))
    return loader_for(dataset, batch_size, workers, False, seed, sampler=sampler)
