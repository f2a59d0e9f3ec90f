"""Planted defect: num_workers is ignored; the loader always uses the default (one worker per usable core)."""

from solutions.ex04_fast_dataloader import CenterCropDataset, seed_worker  # noqa: F401
from solutions.ex04_fast_dataloader import make_loader as _make_loader


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    return _make_loader(root, batch_size, None, shuffle=shuffle, augment=augment, seed=seed)  # planted: None always
