"""Planted defect: the samples are shuffled once, when the loader is made; each epoch then only reorders blocks of
16 of that fixed order, so the same samples keep coming together epoch after epoch."""

import torch
from torch.utils.data import Sampler

from solutions.ex04_fast_dataloader import CenterCropDataset, default_num_workers, loader_for, seed_worker  # noqa: F401

BLOCK = 16


class ShuffledOnce(Sampler[int]):
    def __init__(self, size: int, generator: torch.Generator) -> None:
        self.generator = generator
        self.order = torch.randperm(size, generator=generator).tolist()  # planted: the only full shuffle

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self):
        blocks = [self.order[start:start + BLOCK] for start in range(0, len(self.order), BLOCK)]
        for block in torch.randperm(len(blocks), generator=self.generator).tolist():
            yield from blocks[block]


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    dataset = CenterCropDataset(root, augment, seed)
    if not shuffle:
        return loader_for(dataset, batch_size, workers, False, seed)
    sampler = ShuffledOnce(len(dataset), torch.Generator().manual_seed(seed))
    return loader_for(dataset, batch_size, workers, False, seed, sampler=sampler)
