"""Planted defect: float32 images in [0, 1] (what ToTensor makes) where uint8 was asked for."""

import torch

from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for, seed_worker  # noqa: F401


class CenterCropDataset(_Honest):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image, label = super().__getitem__(index)
        return image.float() / 255, label  # planted


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed)
