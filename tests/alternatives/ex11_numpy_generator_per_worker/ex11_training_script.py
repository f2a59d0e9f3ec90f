"""Alternative: the reference solution, but crops and flips draw from a numpy generator per process: the dataset's own
in this process, and in each worker one that `seed_worker` makes from `get_worker_info().seed` (drawn anew from the
loader's seeded generator whenever it starts its workers)."""

from pathlib import Path

import numpy as np
from torch.utils.data import get_worker_info

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import IMAGE_SIZE, SEED, ShapesFolder as _Honest, loaders_for


class ShapesFolder(_Honest):
    def __init__(self, split_dir, train):
        super().__init__(split_dir, train)
        self.rng = np.random.default_rng(SEED)  # this process's; every worker replaces its copy (seed_worker)

    def draw_crop_and_flip(self, height, width):
        top = int(self.rng.integers(height - IMAGE_SIZE + 1))
        left = int(self.rng.integers(width - IMAGE_SIZE + 1))
        return top, left, bool(self.rng.random() < 0.5)


def seed_worker(worker_id: int) -> None:
    """worker_init_fn: this worker's own generator, from the seed the loader gives it."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    data_dir = Path(data_dir)
    return loaders_for(ShapesFolder(data_dir / "train", train=True), ShapesFolder(data_dir / "val", train=False),
                       device, seed, num_workers, worker_init_fn=seed_worker)
