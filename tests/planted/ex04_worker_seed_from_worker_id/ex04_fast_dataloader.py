"""Planted defect: each worker's generator is seeded with the loader's seed + the worker id, and workers do not
persist: every epoch starts new workers with the same seeds, so every epoch flips the same images."""

import numpy as np
from torch.utils.data import get_worker_info

from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for


class CenterCropDataset(_Honest):
    def __init__(self, root, augment=False, seed=0):
        super().__init__(root, augment, seed)
        self.seed = seed


def seed_worker(worker_id: int) -> None:
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.dataset.seed + worker_id)  # planted: not info.seed


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed,
                      worker_init_fn=seed_worker, persistent_workers=False)
