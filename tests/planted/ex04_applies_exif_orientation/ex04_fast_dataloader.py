"""Exercise 04, planted defect: each photo turned upright as its EXIF orientation tag says (PIL.ImageOps.exif_transpose
before the crop), so a tagged file's crop shows other pixels than the reference's, which keeps the pixels as stored
(as torchvision's ImageFolder loader does)."""

import numpy as np
import torch
from PIL import Image, ImageOps

from loaderlab.images import resize_center_crop
from solutions.ex04_fast_dataloader import *  # noqa: F403
from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import random_flip


class CenterCropDataset(_Honest):
    def __getitem__(self, index):
        path, label = self.samples[index]
        with Image.open(path) as image:
            image = np.asarray(resize_center_crop(ImageOps.exif_transpose(image).convert("RGB")))  # planted
        if self.augment:
            image = random_flip(image, self.rng)
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label
