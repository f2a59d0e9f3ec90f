"""Planted: make_loaders ignores `seed`: every run shuffles from SEED, whatever seed it was given."""

from pathlib import Path

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import SEED, ShapesFolder, loaders_for


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    data_dir = Path(data_dir)
    return loaders_for(ShapesFolder(data_dir / "train", train=True), ShapesFolder(data_dir / "val", train=False),
                       device, SEED, num_workers)  # planted: SEED, not seed
