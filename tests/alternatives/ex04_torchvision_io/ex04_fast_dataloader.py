"""Exercise 04, another route: torchvision decodes and crops uint8 tensors; flips come from torch's generators.

- `torchvision.io.read_file` + `decode_image` give a uint8 CHW tensor (decode_image reads the format from the bytes:
  `decode_jpeg` refuses the PNG saved under a .jpg name); `transforms.v2` Resize(256) +
  CenterCrop(224) on it stays uint8 (antialiased bilinear, as Pillow's reference resize);
- no worker_init_fn: the DataLoader seeds torch's generator in every worker with the loader's base seed
  + the worker id (a new base seed whenever it starts workers), so `torch.rand` differs between workers
  and epochs; in this process (num_workers=0) the dataset draws from a torch.Generator seeded with `seed`.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info
from torchvision.io import ImageReadMode, decode_image, read_file
from torchvision.transforms import v2

from loaderlab.images import CROP, RESIZE, list_samples
from loaderlab.machine import usable_cores

CENTRE_CROP = v2.Compose([v2.Resize(RESIZE, antialias=True), v2.CenterCrop(CROP)])


class CenterCropDataset(Dataset):
    """An ImageFolder tree as (uint8 (3, 224, 224) centre crop, label) samples, optionally flipped at random."""

    def __init__(self, root: Path | str, augment: bool = False, seed: int = 0) -> None:
        self.samples = list_samples(root)
        self.augment = augment
        self.generator = torch.Generator().manual_seed(seed)  # only this process draws from it

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = CENTRE_CROP(decode_image(read_file(str(path)), mode=ImageReadMode.RGB))
        if self.augment:
            in_worker = get_worker_info() is not None  # workers: torch's generator, seeded there by the DataLoader
            if torch.rand((), generator=None if in_worker else self.generator) < 0.5:
                image = image.flip(-1)
        return image, label


def make_loader(root: Path | str, batch_size: int = 64, num_workers: int | None = None, *,
                shuffle: bool = False, augment: bool = False, seed: int = 0) -> DataLoader:
    """A DataLoader of (uint8 (N, 3, 224, 224) centre crops, int64 (N,) labels) over the ImageFolder at `root`."""
    workers = usable_cores() if num_workers is None else num_workers
    return DataLoader(CenterCropDataset(root, augment, seed), batch_size=batch_size, shuffle=shuffle,
                      num_workers=workers, generator=torch.Generator().manual_seed(seed),
                      persistent_workers=workers > 0)
