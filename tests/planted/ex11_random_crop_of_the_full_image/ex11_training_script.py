"""Planted: the reference solution, except that train items are random crops of the FULL-size image (the resize to
a short side of RESIZE forgotten before the random crop): each crop is a small patch, unlike the val centre crops of
the resized image. Every item check passes; the model learns other pictures than those it is judged on."""

from pathlib import Path

import numpy as np

from loaderlab.images import decode_rgb
from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import SEED, ShapesFolder as _Honest, loaders_for


class ShapesFolder(_Honest):
    def decode(self, path):
        return np.asarray(decode_rgb(path)) if self.train else super().decode(path)  # planted: no resize for train


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    data_dir = Path(data_dir)
    return loaders_for(ShapesFolder(data_dir / "train", train=True), ShapesFolder(data_dir / "val", train=False),
                       device, seed, num_workers)
