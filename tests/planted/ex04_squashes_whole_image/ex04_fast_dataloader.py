"""Planted defect: the whole image is squashed to 224 x 224 (no aspect-keeping resize, no centre crop)."""

import numpy as np
import torch
from PIL import Image

from loaderlab.images import CROP
from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for, random_flip, seed_worker  # noqa: F401


class CenterCropDataset(_Honest):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        with Image.open(path) as image:
            array = np.asarray(image.convert("RGB").resize((CROP, CROP), Image.BILINEAR))  # planted
        if self.augment:
            array = random_flip(array, self.rng)
        return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1))), label


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed)
