"""Pieces notebook 08 assembles for its measurements: images decoded small, augmentation drawn per read or in other
ways, in-memory variants for the accuracy trade-offs, and a training loop over the fixed model that records each
epoch (`loaderlab.training`).

These are building blocks, not exercise 11's answer: the script's contract (its dataset, loaders, labels, errors and
timing) is the learner's to fix in `exercises/ex11_training_script.py`. Top-level classes, so that DataLoader workers
can import them under spawn as well as fork.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import Dataset

from loaderlab.images import short_side_size
from loaderlab.lessons.m07_device import crop_flip_batch, crop_flip_draws
from loaderlab.images import Sample, list_samples
from loaderlab.lessons.m04_pitfalls import uint8_to_normalised
from loaderlab.training import (IMAGE_SIZE, MEAN, RESIZE, SEED, STD, WARMUP_BATCHES, EpochRecord, StallMeter,
                                TrainingRun, make_optimizer, seed_everything, train_step)

AUGMENTATIONS = ("per_read", "frozen", "centre_once", "centre", "none")


# ---- one image ---------------------------------------------------------------------------------

def draft_short_side(path: Path | str, short_side: int = RESIZE) -> np.ndarray:
    """uint8 (H, W, 3) with its short side resized to `short_side`; JPEG draft mode decodes at 1/2 to 1/8 scale
    first where the image is large enough (notebook 01), so the full-size pixels are never made."""
    with Image.open(path) as image:
        size = short_side_size(*image.size, resize=short_side)
        image.draft("RGB", size)
        return np.asarray(image.convert("RGB").resize(size, Image.BILINEAR))


def centre_square(image: np.ndarray, size: int = IMAGE_SIZE) -> np.ndarray:
    """The centre `size` x `size` of an (H, W, 3) image (a view)."""
    top, left = (image.shape[0] - size) // 2, (image.shape[1] - size) // 2
    return image[top:top + size, left:left + size]


def random_crop_flip(image: np.ndarray, rng: np.random.Generator, size: int = IMAGE_SIZE) -> np.ndarray:
    """A random `size` x `size` crop of an (H, W, 3) image, mirrored with probability 1/2 (a view)."""
    top = int(rng.integers(0, image.shape[0] - size + 1))
    left = int(rng.integers(0, image.shape[1] - size + 1))
    crop = image[top:top + size, left:left + size]
    return crop[:, ::-1] if rng.random() < 0.5 else crop


def channels_first(image: np.ndarray) -> torch.Tensor:
    """An (H, W, 3) uint8 image as a contiguous (3, H, W) tensor."""
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))


# ---- datasets ----------------------------------------------------------------------------------

class DraftFolder(Dataset):
    """`split_dir/<class>/*.jpg` decoded small on every read, as `(uint8 (3, size, size) tensor, label)`.

    With `augment`, a random crop and flip drawn on every read from `self.rng`: give each worker its own generator
    (`worker_init_fn=loaderlab.lessons.m04_pitfalls.reseed_worker`), or every worker draws the same numbers. Without, the centre
    crop. `targets` are the labels in index order (class folders sorted, as `list_samples` numbers them).
    """

    def __init__(self, split_dir: Path | str, augment: bool, resize: int = RESIZE, size: int = IMAGE_SIZE,
                 seed: int = SEED) -> None:
        self.samples = list_samples(split_dir)
        self.targets = [label for _, label in self.samples]
        self.augment, self.resize, self.size = augment, resize, size
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = draft_short_side(path, self.resize)
        crop = random_crop_flip(image, self.rng, self.size) if self.augment else centre_square(image, self.size)
        return channels_first(crop), label


def decode_squares(samples: Sequence[Sample], resize: int = RESIZE) -> tuple[np.ndarray, np.ndarray]:
    """Every sample decoded once (draft mode), its short side resized to `resize`, then its centre square:
    uint8 (N, resize, resize, 3) images and int64 labels. Squares, so that a batch of them can be cropped at once."""
    images = np.empty((len(samples), resize, resize, 3), dtype=np.uint8)
    for i, (path, _) in enumerate(samples):
        images[i] = centre_square(draft_short_side(path, resize), resize)
    return images, np.array([label for _, label in samples], dtype=np.int64)


class MemoryImages(Dataset):
    """Decoded squares (`decode_squares`) as `(uint8 (3, ...) tensor, label)` items, augmented one of these ways:

    - `per_read`: a random IMAGE_SIZE crop and flip drawn on every read (from `self.rng`; reseed it per worker);
    - `frozen`: a crop and flip drawn once per image in `__init__`, the same on every read (augmentation frozen);
    - `centre_once`: the centre crop, made once (preprocessing stored, as module 06 would), with a flip per read;
    - `centre`: the centre crop, no flip (validation);
    - `none`: the whole square, for augmentation applied to whole batches later (`BatchCropFlip`).
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, augmentation: str, seed: int = SEED) -> None:
        if augmentation not in AUGMENTATIONS:
            raise ValueError(f"augmentation {augmentation!r}: choose one of {AUGMENTATIONS}")
        self.images, self.labels, self.augmentation = images, labels, augmentation
        self.targets = labels.tolist()
        self.rng = np.random.default_rng(seed)
        if augmentation == "frozen":
            self.images = np.stack([random_crop_flip(image, self.rng) for image in images])
        elif augmentation in ("centre_once", "centre"):
            self.images = np.stack([centre_square(image) for image in images])

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index]
        if self.augmentation == "per_read":
            image = random_crop_flip(image, self.rng)
        elif self.augmentation == "centre_once" and self.rng.random() < 0.5:
            image = image[:, ::-1]
        return channels_first(image), int(self.labels[index])


class BatchCropFlip:
    """A loader of whole squares seen as a loader of augmented batches: each batch gets a random IMAGE_SIZE crop and
    flip per image (its own draw each), in two gathers for the whole batch (`loaderlab.lessons.m07_device.crop_flip_batch`)."""

    def __init__(self, loader: Any, seed: int = SEED, size: int = IMAGE_SIZE) -> None:
        self.loader, self.size = loader, size
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels in self.loader:
            tops, lefts, flips = crop_flip_draws(len(images), images.shape[2], images.shape[3], self.size,
                                                 self.generator)
            yield crop_flip_batch(images, self.size, tops, lefts, flips), labels


# ---- training, measured -----------------------------------------------------------------------

def model_input(images: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A uint8 (N, 3, S, S) batch copied to `device` (without blocking only from pinned memory), then scaled to 0..1
    and normalised there, all at once."""
    return uint8_to_normalised(images.to(device, non_blocking=images.is_pinned()), MEAN, STD)


@torch.no_grad()
def predictions(model: nn.Module, loader: Iterable[Any], device: torch.device | str,
                prepare: Callable[[torch.Tensor, Any], torch.Tensor] = model_input) -> tuple[np.ndarray, np.ndarray]:
    """(predicted labels, true labels) over the loader, the model in eval mode."""
    model.eval()
    predicted, true = [], []
    for images, labels in loader:
        predicted.append(model(prepare(images, device)).argmax(dim=1).cpu())
        true.append(torch.as_tensor(labels))
    return torch.cat(predicted).numpy(), torch.cat(true).numpy()


def accuracy_by_class(predicted: np.ndarray, true: np.ndarray, num_classes: int) -> np.ndarray:
    """The share of each class's samples predicted right (NaN for a class with none)."""
    hits = np.bincount(true[predicted == true], minlength=num_classes)
    counts = np.bincount(true, minlength=num_classes)
    return np.where(counts > 0, hits / np.maximum(counts, 1), np.nan)


def train_and_record(make_model: Callable[[], nn.Module], train_loader: Iterable[Any], val_loader: Iterable[Any],
                     epochs: int, device: torch.device | str = "cpu", seed: int = SEED,
                     prepare: Callable[[torch.Tensor, Any], torch.Tensor] = model_input,
                     settings: Mapping[str, Any] | None = None, profile: str = "") -> tuple[TrainingRun, nn.Module]:
    """Train a fresh `make_model()` (seeded) with the fixed optimiser for `epochs`, evaluating after each; the run's
    records and the trained model.

    Each epoch's record holds the wall seconds since training began (evaluation included), the val accuracy, and
    the images/s and stall fraction of its training pass measured by a `StallMeter` (its first WARMUP_BATCHES
    batches left out)."""
    seed_everything(seed)
    device = torch.device(device)
    model = make_model().to(device)
    optimizer = make_optimizer(model)
    run = TrainingRun(profile=profile, settings={"device": str(device), "seed": seed, "epochs": epochs,
                                                 **(settings or {})})
    began = time.perf_counter()
    for epoch in range(1, epochs + 1):
        meter = StallMeter(skip_batches=WARMUP_BATCHES)
        counted = 0
        for position, (images, labels) in enumerate(meter.iterate(train_loader)):
            train_step(model, optimizer, prepare(images, device), torch.as_tensor(labels).to(device))
            if device.type == "cuda":
                torch.cuda.synchronize()  # the step's time is the device's, not the launch's
            counted += len(labels) if position >= WARMUP_BATCHES else 0
        predicted, true = predictions(model, val_loader, device, prepare)
        busy = meter.wait_s + meter.step_s
        run.records.append(EpochRecord(epoch, time.perf_counter() - began, float(np.mean(predicted == true)),
                                       counted / busy if busy > 0 else 0.0, meter.stall_fraction))
    return run, model

