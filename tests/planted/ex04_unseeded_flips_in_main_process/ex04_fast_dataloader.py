"""Planted defect: flips come from torch's global generator. The DataLoader seeds it in every worker, so with workers
all is well; with num_workers=0 nothing seeds it and `seed` does not reproduce the flips."""

import numpy as np
import torch

from solutions.ex01_profile_and_fix import fast_center_crop
from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for, seed_worker  # noqa: F401


class CenterCropDataset(_Honest):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = fast_center_crop(path)
        if self.augment and torch.rand(()) < 0.5:  # planted: unseeded in this process
            image = image[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed, worker_init_fn=None)
