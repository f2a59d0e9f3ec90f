"""Planted defect: shuffle=True shuffles the samples inside each batch only; every batch holds the same samples."""

import torch
from torch.utils.data import DataLoader, Sampler

from solutions.ex04_fast_dataloader import CenterCropDataset, default_num_workers, loader_for, seed_worker  # noqa: F401


class InsideBatches(Sampler[list[int]]):
    def __init__(self, size: int, batch_size: int, generator: torch.Generator) -> None:
        self.size, self.batch_size, self.generator = size, batch_size, generator

    def __len__(self) -> int:
        return -(-self.size // self.batch_size)

    def __iter__(self):
        for start in range(0, self.size, self.batch_size):
            batch = list(range(start, min(start + self.batch_size, self.size)))
            yield [batch[i] for i in torch.randperm(len(batch), generator=self.generator).tolist()]  # planted


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    dataset = CenterCropDataset(root, augment, seed)
    if not shuffle:
        return loader_for(dataset, batch_size, workers, False, seed)
    sampler = InsideBatches(len(dataset), batch_size, torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_sampler=sampler, num_workers=workers, worker_init_fn=seed_worker,
                      generator=torch.Generator().manual_seed(seed), persistent_workers=workers > 0)
