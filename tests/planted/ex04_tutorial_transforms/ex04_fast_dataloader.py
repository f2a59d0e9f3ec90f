"""Planted slow implementation: correct uint8 batches, but the tutorial's per-sample work
(full decode, Resize(256) then CenterCrop(224)) and no worker process."""

import torch
from PIL import Image
from torchvision import transforms

from loaderlab.images import CROP, RESIZE
from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import loader_for, seed_worker  # noqa: F401

TUTORIAL_CROP = transforms.Compose([transforms.Resize(RESIZE), transforms.CenterCrop(CROP), transforms.PILToTensor()])


class CenterCropDataset(_Honest):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        with Image.open(path) as image:
            return TUTORIAL_CROP(image.convert("RGB")), label  # planted: no draft, two resampling steps


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = 0 if num_workers is None else num_workers  # planted: no workers by default
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed)
