"""Planted: make_loaders works only when data_dir is a Path (the contract takes a Path or a str)."""

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import SEED, ShapesFolder, loaders_for


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    return loaders_for(ShapesFolder(data_dir / "train", train=True),  # planted: no Path(data_dir)
                       ShapesFolder(data_dir / "val", train=False), device, seed, num_workers)
