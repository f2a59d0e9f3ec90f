"""Planted defect: each flip comes from a generator seeded with (seed, sample index): different in every worker and
reproducible, but the same flips every epoch."""

import numpy as np
import torch

from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for, seed_worker  # noqa: F401
from solutions.ex01_profile_and_fix import fast_center_crop


class CenterCropDataset(_Honest):
    def __init__(self, root, augment=False, seed=0):
        super().__init__(root, augment, seed)
        self.seed = seed

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = fast_center_crop(path)
        if self.augment and np.random.default_rng([self.seed, index]).random() < 0.5:  # planted
            image = image[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed)
