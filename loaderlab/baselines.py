"""The naive loaders that notebooks and graders measure against. Deliberately plain."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from loaderlab.images import CROP, RESIZE, Sample, draft_center_crop, resize_center_crop
from loaderlab.sim import SlowStorage

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def naive_image(path: Path | str) -> np.ndarray:
    """One image the way most first loaders do it: float32, normalised, CHW, at full cost."""
    image = Image.open(path).convert("RGB")
    image = resize_center_crop(image)
    array = np.asarray(image, dtype=np.float32) / 255.0
    array = (array - IMAGENET_MEAN) / IMAGENET_STD
    return array.transpose(2, 0, 1)


def naive_batches(samples: Sequence[Sample], batch_size: int = 32) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Batches of (float32 NCHW images, int64 labels), one image after another."""
    for start in range(0, len(samples), batch_size):
        chunk = samples[start : start + batch_size]
        images = np.stack([naive_image(path) for path, _ in chunk])
        yield images, np.array([label for _, label in chunk], dtype=np.int64)


def naive_pool_batches(samples: Sequence[Sample], batch_size: int, workers: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Batches of float32 images made by `multiprocessing.Pool.map(naive_image, ...)`: the usual first
    process loader. Every 600 KB float32 image is pickled back through a pipe, and the epoch waits for all."""
    with multiprocessing.Pool(workers) as pool:
        images = pool.map(naive_image, [path for path, _ in samples])
    for start in range(0, len(samples), batch_size):
        labels = [label for _, label in samples[start : start + batch_size]]
        yield np.stack(images[start : start + batch_size]), np.array(labels, dtype=np.int64)


def sequential_reads(storage: SlowStorage, paths: Iterable[Path | str]) -> Iterator[bytes]:
    """Each file's bytes, one request at a time."""
    for path in paths:
        yield storage.read(path)


def tutorial_dataloader(root: Path | str, batch_size: int = 64, num_workers: int = 0, **loader_options: Any) -> Any:
    """The `DataLoader` most tutorials show: `ImageFolder` with `Resize(256)`, `CenterCrop(224)`, `ToTensor()`.

    Batches are (float32 (N, 3, 224, 224) in [0, 1], int64 (N,)) in file order; `root` holds one
    folder per class. The defaults (batch 64, no worker process) are the tutorials' settings;
    `loader_options` go to the `DataLoader`. torch is imported here, so the other baselines stay light.
    """
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    transform = transforms.Compose([transforms.Resize(RESIZE), transforms.CenterCrop(CROP), transforms.ToTensor()])
    dataset = datasets.ImageFolder(str(root), transform=transform)
    return DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, **loader_options)


def draft_crop_loader(root: Path | str, batch_size: int = 64, num_workers: int = 2) -> Any:
    """A CPU loader doing exercise 04's work without exercise 04's answer: JPEG draft mode and one crop-resize
    per image (`draft_center_crop`) in `num_workers` DataLoader workers, batches of (uint8 (N, 3, 224, 224),
    int64 (N,)) in file order. Exercise 10 times the device's decoding against it."""
    from torch.utils.data import DataLoader

    from loaderlab.torchdata import CenterCropFolder

    return DataLoader(CenterCropFolder(root, crop=draft_center_crop), batch_size=batch_size, num_workers=num_workers,
                      timeout=120 if num_workers else 0)
