"""Planted defect: the samples are listed by hand and empty class folders are skipped silently, which renumbers
every class after them."""

from pathlib import Path

import numpy as np

from loaderlab.images import IMAGE_SUFFIXES, Sample
from solutions.ex04_fast_dataloader import CenterCropDataset as _Honest
from solutions.ex04_fast_dataloader import default_num_workers, loader_for, seed_worker  # noqa: F401


class CenterCropDataset(_Honest):
    def __init__(self, root, augment=False, seed=0):  # no super().__init__: list_samples would refuse the empty class
        classes = [folder for folder in sorted(Path(root).iterdir()) if folder.is_dir()
                   and any(folder.iterdir())]  # planted: empty class folders skipped
        self.samples = [Sample(path, label) for label, folder in enumerate(classes)
                        for path in sorted(folder.iterdir()) if path.suffix.lower() in IMAGE_SUFFIXES]
        self.augment = augment
        self.rng = np.random.default_rng(seed)


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed)
