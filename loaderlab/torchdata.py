"""PyTorch pieces shared by exercises and graders: a map-style dataset of reference centre crops."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from loaderlab.images import list_samples, reference_crop


class CenterCropFolder(Dataset):
    """An ImageFolder tree (`split_dir/<class>/*.jpg`) as `(uint8 (3, 224, 224) tensor, int label)` items.

    Samples are sorted by class, then file name (as torchvision's ImageFolder does);
    item i is `crop(samples[i].path)` in channels-first layout: `reference_crop` by default, or another top-level
    function of a path giving a uint8 (224, 224, 3) array (`loaderlab.images.draft_center_crop` for a cheap one). `targets`
    holds every label in index order, so samplers can weigh samples without
    decoding a single image. Top-level and picklable: DataLoader workers can
    receive it under fork and spawn.
    """

    def __init__(self, split_dir: Path | str, crop: Callable[[Path], np.ndarray] = reference_crop) -> None:
        self.samples = list_samples(split_dir)
        self.crop = crop
        self.targets = [label for _, label in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        return torch.from_numpy(self.crop(path).transpose(2, 0, 1).copy()), label  # a writable CHW copy
