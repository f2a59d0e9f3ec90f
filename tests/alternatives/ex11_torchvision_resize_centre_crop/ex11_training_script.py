"""Exercise 11, a correct alternative: validation items through torchvision's own Resize(RESIZE) and
CenterCrop(IMAGE_SIZE) on the decoded image (whose long side torchvision truncates, and whose crop offset it
rounds), the training items as the solution makes them."""

import numpy as np
import torch
from torchvision.transforms import v2

from loaderlab.images import decode_rgb
from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import IMAGE_SIZE, RESIZE, SEED, ShapesFolder as _Honest, loaders_for

_VAL = v2.Compose([v2.PILToTensor(), v2.Resize(RESIZE), v2.CenterCrop(IMAGE_SIZE)])


class ShapesFolder(_Honest):
    def __getitem__(self, index):
        if self.train:
            return super().__getitem__(index)
        path, label = self.samples[index]
        return _VAL(decode_rgb(path)), label


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    from pathlib import Path
    data_dir = Path(data_dir)
    return loaders_for(ShapesFolder(data_dir / "train", train=True), ShapesFolder(data_dir / "val", train=False),
                       device, seed, num_workers)
