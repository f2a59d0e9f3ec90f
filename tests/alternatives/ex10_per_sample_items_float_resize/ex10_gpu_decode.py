"""Correct alternative: the workers send one sample per item (batch_size=None) and this process makes the batches;
each image is resized with torch.nn.functional.interpolate in float32 and rounded, as torchvision does on a GPU."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from torch.nn.functional import interpolate
from torch.utils.data import DataLoader

from loaderlab.device import decode_jpegs, default_device
from loaderlab.images import CROP, RESIZE
from loaderlab.tar_shards import TarShardReader


class RawBatch(NamedTuple):
    jpegs: list[bytes]
    labels: torch.Tensor
    keys: list[str]


def read_batches(shard_dir: Path | str, batch_size: int, num_workers: int) -> Iterator[RawBatch]:
    loader = DataLoader(TarShardReader(shard_dir), batch_size=None, num_workers=num_workers,
                        timeout=120 if num_workers else 0)
    batch = []
    for sample in loader:
        batch.append(sample)
        if len(batch) == batch_size:
            yield _raw(batch)
            batch = []
    if batch:
        yield _raw(batch)


def _raw(samples: list) -> RawBatch:
    return RawBatch([s.data for s in samples], torch.tensor([int(s.label) for s in samples]), [s.key for s in samples])


def resize_center_crop(image: torch.Tensor) -> torch.Tensor:
    height, width = image.shape[1:]
    size = (RESIZE, int(RESIZE * width / height)) if height <= width else (int(RESIZE * height / width), RESIZE)
    resized = interpolate(image[None].float(), size=size, mode="bilinear", antialias=True, align_corners=False)[0]
    resized = resized.round_().clamp_(0, 255).to(torch.uint8)
    top, left = round((size[0] - CROP) / 2), round((size[1] - CROP) / 2)
    return resized[:, top : top + CROP, left : left + CROP]


def decode_batch(jpegs: Sequence[bytes], device: torch.device | str, names: Sequence[str] | None = None) -> torch.Tensor:
    return torch.stack([resize_center_crop(image) for image in decode_jpegs(jpegs, device, names)])


def gpu_decode_loader(shard_dir: Path | str, batch_size: int = 64, device: torch.device | str | None = None,
                      num_workers: int = 2) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    device = torch.device(device) if device is not None else default_device()
    batches = read_batches(shard_dir, batch_size, num_workers)
    try:
        for jpegs, labels, keys in batches:
            yield decode_batch(jpegs, device, keys), labels.to(device)
    finally:
        batches.close()
