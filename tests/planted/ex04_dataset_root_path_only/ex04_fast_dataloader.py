"""Planted defect: CenterCropDataset takes its root for a Path (`root.is_dir()`), so a str root, which the contract
promises too, raises AttributeError. make_loader hands it a Path, so only a dataset made directly shows it."""

from pathlib import Path

from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for, random_flip, seed_worker  # noqa: F401


class CenterCropDataset(_Honest):
    def __init__(self, root, augment=False, seed=0):
        if not root.is_dir():  # planted: a str has no is_dir()
            raise FileNotFoundError(f"no ImageFolder at {root}")
        super().__init__(root, augment, seed)


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(Path(root), augment, seed), batch_size, workers, shuffle, seed)
