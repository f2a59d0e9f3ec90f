"""Planted: num_workers=None leaves one core for the main process (usable_cores() - 1 workers, at least 1), where
the contract asks one worker per usable core. (On a 1-core machine it cannot be told from the solution.)"""

from pathlib import Path

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import SEED, ShapesFolder, loaders_for, usable_cores


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    data_dir = Path(data_dir)
    if num_workers is None:
        num_workers = max(1, usable_cores() - 1)  # planted
    return loaders_for(ShapesFolder(data_dir / "train", train=True), ShapesFolder(data_dir / "val", train=False),
                       device, seed, num_workers)
