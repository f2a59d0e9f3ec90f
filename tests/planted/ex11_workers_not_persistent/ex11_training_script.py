"""Planted: one worker per usable core, but started again at every epoch (persistent_workers=False)."""

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import SEED, ShapesFolder, loaders_for


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    from pathlib import Path
    data_dir = Path(data_dir)
    return loaders_for(ShapesFolder(data_dir / "train", train=True), ShapesFolder(data_dir / "val", train=False),
                       device, seed, num_workers, persistent_workers=False)  # planted
