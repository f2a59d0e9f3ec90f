"""Planted defect: make_loader takes its root for a Path (`root.is_dir()`), so a str root, which the contract
promises too, raises AttributeError."""

from solutions.ex04_fast_dataloader import CenterCropDataset, default_num_workers, random_flip, seed_worker  # noqa: F401
from solutions.ex04_fast_dataloader import make_loader as _make_loader


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    if not root.is_dir():  # planted: a str has no is_dir()
        raise FileNotFoundError(f"no ImageFolder at {root}")
    return _make_loader(root, batch_size, num_workers, shuffle=shuffle, augment=augment, seed=seed)
