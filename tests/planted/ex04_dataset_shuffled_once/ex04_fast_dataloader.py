"""Planted defect: shuffle=True shuffles the dataset's sample list once, when it is made; every epoch repeats it."""

import numpy as np

from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for, seed_worker  # noqa: F401


class CenterCropDataset(_Honest):
    def __init__(self, root, augment=False, seed=0, shuffle=False):
        super().__init__(root, augment, seed)
        if shuffle:
            order = np.random.default_rng(seed).permutation(len(self.samples))  # planted: once, not every epoch
            self.samples = [self.samples[i] for i in order]


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed, shuffle), batch_size, workers, False, seed)
