"""Exercise 04, planted defect: JPEG draft mode asked for a short side of 160, below the 256 the resize needs, so
some images are decoded too small and scaled up: 1.98 levels off on average over ci's 200 training images, within
the contract's 2.0, but one image 6.3 off, past its 6.0 for any image (and none of the 70 the loader checks read)."""

import numpy as np
import torch
from PIL import Image

from loaderlab.images import CROP, RESIZE
from solutions.ex04_fast_dataloader import *  # noqa: F403
from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import random_flip

DRAFT = 160  # planted: should be RESIZE (draft mode never goes below what it is asked for)


def draft_crop(path):
    with Image.open(path) as image:
        width, height = image.size
        if width <= height:
            resized, draft = (RESIZE, int(RESIZE * height / width)), (DRAFT, int(DRAFT * height / width))
        else:
            resized, draft = (int(RESIZE * width / height), RESIZE), (int(DRAFT * width / height), DRAFT)
        image.draft("RGB", draft)
        left, top = round((resized[0] - CROP) / 2.0), round((resized[1] - CROP) / 2.0)
        scale_x, scale_y = image.size[0] / resized[0], image.size[1] / resized[1]
        box = (left * scale_x, top * scale_y, (left + CROP) * scale_x, (top + CROP) * scale_y)
        return np.asarray(image.convert("RGB").resize((CROP, CROP), Image.BILINEAR, box=box), dtype=np.uint8)


class CenterCropDataset(_Honest):
    def __getitem__(self, index):
        path, label = self.samples[index]
        image = draft_crop(path)
        if self.augment:
            image = random_flip(image, self.rng)
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label
