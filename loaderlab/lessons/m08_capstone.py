"""Notebook 08: the tools that diagnose a training pipeline, and the notebook's own example pipeline to use them on.

The tools take any loader (or dataset) and measure, compare or draw: where the loop's time goes (`loop_rate`, with a
`loaderlab.training.StallMeter`), the labels two epochs deliver in order (`label_orders`, `same_position_share`), the
labels per class in each batch (`labels_per_batch`), the augmented reads of one item from each worker in each epoch
(`SameItem`, `augmented_views`, `show_views`), an epoch's time with and without its start-up (`time_epoch`), a
run trained and evaluated per epoch (`train_and_record`), and whether two settings' accuracies differ by more than
their seeds do (`seed_verdict`).

The example works on JPEG bytes held in memory (as a record file or a shard hands them over), not on a folder: a
dataset that decodes every read (`JpegBytes`), the same images decoded once (`decode_squares`, `MemoryImages`),
augmentation per item or per batch (`BatchCropFlip`), and two pieces written with defects of their own, for the
notebook to find by measuring: a sampler (`WindowShuffle`) and a worker seeding function (`seed_worker`).

Random crops and flips draw from torch's generator, which the DataLoader seeds anew in every worker (torch, `random`
and NumPy's global generator, from the loader's own generator). Top-level classes, so that DataLoader workers can
import them under spawn as well as fork.
"""

from __future__ import annotations

import io
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import Dataset, Sampler

from loaderlab.images import short_side_size
from loaderlab.lessons.m04_pitfalls import uint8_to_normalised
from loaderlab.lessons.m07_device import crop_flip_batch, crop_flip_draws
from loaderlab.training import (IMAGE_SIZE, MEAN, RESIZE, SEED, STD, WARMUP_BATCHES, EpochRecord, StallMeter,
                                TrainingRun, make_optimizer, seed_everything, train_step)

AUGMENTATIONS = ("per_read", "frozen", "centre_once", "centre", "none")


# ---- the example's images ------------------------------------------------------------------------

def decode_square(blob: bytes, resize: int = RESIZE) -> np.ndarray:
    """uint8 (resize, resize, 3): a JPEG's bytes decoded whole, its short side resized to `resize`, the centre square."""
    with Image.open(io.BytesIO(blob)) as image:
        image = image.convert("RGB").resize(short_side_size(*image.size, resize=resize), Image.BILINEAR)
    return centre_square(np.asarray(image), resize)


def decode_squares(blobs: Sequence[bytes], resize: int = RESIZE) -> np.ndarray:
    """Every JPEG decoded once (`decode_square`): uint8 (N, resize, resize, 3)."""
    images = np.empty((len(blobs), resize, resize, 3), dtype=np.uint8)
    for i, blob in enumerate(blobs):
        images[i] = decode_square(blob, resize)
    return images


def centre_square(image: np.ndarray, size: int = IMAGE_SIZE) -> np.ndarray:
    """The centre `size` x `size` of an (H, W, 3) image (a view)."""
    top, left = (image.shape[0] - size) // 2, (image.shape[1] - size) // 2
    return image[top:top + size, left:left + size]


def random_crop_flip(image: np.ndarray, size: int = IMAGE_SIZE, generator: torch.Generator | None = None) -> np.ndarray:
    """A random `size` x `size` crop of an (H, W, 3) image, mirrored with probability 1/2 (a view); drawn from
    `generator`, or torch's global generator (seeded anew in every DataLoader worker)."""
    top = int(torch.randint(0, image.shape[0] - size + 1, (1,), generator=generator))
    left = int(torch.randint(0, image.shape[1] - size + 1, (1,), generator=generator))
    crop = image[top:top + size, left:left + size]
    return crop[:, ::-1] if float(torch.rand(1, generator=generator)) < 0.5 else crop


def channels_first(image: np.ndarray) -> torch.Tensor:
    """An (H, W, 3) uint8 image as a contiguous (3, H, W) tensor."""
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))


class JpegBytes(Dataset):
    """The example as written: JPEG bytes in memory and their labels, each read decoded (`decode_square`), then a
    random `size` crop and flip (`augment`) or the centre crop, as `(uint8 (3, size, size) tensor, label)`."""

    def __init__(self, blobs: Sequence[bytes], labels: Sequence[int], augment: bool, resize: int = RESIZE,
                 size: int = IMAGE_SIZE) -> None:
        self.blobs, self.labels = list(blobs), [int(label) for label in labels]
        self.augment, self.resize, self.size = augment, resize, size

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = decode_square(self.blobs[index], self.resize)
        crop = random_crop_flip(image, self.size) if self.augment else centre_square(image, self.size)
        return channels_first(crop), self.labels[index]


class MemoryImages(Dataset):
    """Decoded squares (`decode_squares`) as `(uint8 (3, ...) tensor, label)` items, augmented one of these ways:

    - `per_read`: a random `size` crop and flip drawn on every read;
    - `frozen`: a crop and flip drawn once per image in `__init__` (from `seed`), the same on every read;
    - `centre_once`: the centre crop, made once (preprocessing stored, as module 06 would), with a flip per read;
    - `centre`: the centre crop, no flip (validation);
    - `none`: the whole square, for augmentation applied to whole batches later (`BatchCropFlip`).
    """

    def __init__(self, images: np.ndarray, labels: Sequence[int] | np.ndarray, augmentation: str,
                 size: int = IMAGE_SIZE, seed: int = SEED) -> None:
        if augmentation not in AUGMENTATIONS:
            raise ValueError(f"augmentation {augmentation!r}: choose one of {AUGMENTATIONS}")
        self.images, self.labels = images, np.asarray(labels, dtype=np.int64)
        self.augmentation, self.size = augmentation, size
        if augmentation == "frozen":
            generator = torch.Generator().manual_seed(seed)
            self.images = np.stack([random_crop_flip(image, size, generator) for image in images])
        elif augmentation in ("centre_once", "centre"):
            self.images = np.stack([centre_square(image, size) for image in images])

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index]
        if self.augmentation == "per_read":
            image = random_crop_flip(image, self.size)
        elif self.augmentation == "centre_once" and float(torch.rand(1)) < 0.5:
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


# ---- the example's own pieces, each with a defect for the notebook to find ------------------------

class WindowShuffle(Sampler[int]):
    """The example's sampler, written to keep reads close together: the indices in windows of `window` consecutive
    ones, each window shuffled, the windows in written order, from a generator seeded with `seed` on every pass."""

    def __init__(self, size: int, window: int, seed: int = SEED) -> None:
        self.size, self.window, self.seed = size, window, seed

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed)
        for start in range(0, self.size, self.window):
            stop = min(start + self.window, self.size)
            yield from (start + torch.randperm(stop - start, generator=generator)).tolist()


def seed_worker(worker_id: int) -> None:
    """The example's `worker_init_fn`, written for reproducibility: seeds torch's, Python's and NumPy's generators
    with SEED in every worker."""
    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)


# ---- tools: where the time goes ---------------------------------------------------------------------

def loop_rate(batches: Iterable[Any], step: Callable[[Any], Any] = lambda batch: None,
              skip: int = 1) -> tuple[float, StallMeter]:
    """Images/s of `step` over `batches` (each `(images, labels)`), the first `skip` batches left out, and the
    StallMeter that split the loop's time into waiting for a batch and the step. With the default `step`, which does
    nothing, this is the data-only rate."""
    meter, counted = StallMeter(skip_batches=skip), 0
    for position, batch in enumerate(meter.iterate(batches)):
        step(batch)
        counted += len(batch[1]) if position >= skip else 0
    busy = meter.wait_s + meter.step_s
    return (counted / busy if busy > 0 else 0.0), meter


@dataclass(frozen=True)
class EpochTiming:
    """One pass over a loader: seconds until its first batch arrived (start-up: workers starting, first reads),
    seconds in all, images in all, and the steady state the StallMeter measured (the first batches left out)."""

    startup_s: float
    total_s: float
    images: int
    steady_images_per_s: float

    @property
    def images_per_s(self) -> float:
        """Images/s over the whole pass, start-up included."""
        return self.images / self.total_s if self.total_s > 0 else 0.0


def time_epoch(loader: Iterable[Any], step: Callable[[Any], Any] = lambda batch: None,
               skip: int = WARMUP_BATCHES) -> EpochTiming:
    """Time one pass of `step` over `loader` (batches of `(images, labels)`): its start-up (until the first batch),
    the whole pass, and the steady images/s with the first `skip` batches left out."""
    meter, images, steady_images, startup = StallMeter(skip_batches=skip), 0, 0, None
    began = time.perf_counter()
    for position, batch in enumerate(meter.iterate(loader)):
        if startup is None:
            startup = time.perf_counter() - began
        step(batch)
        images += len(batch[1])
        steady_images += len(batch[1]) if position >= skip else 0
    busy = meter.wait_s + meter.step_s
    return EpochTiming(startup or 0.0, time.perf_counter() - began, images,
                       steady_images / busy if busy > 0 else 0.0)


# ---- tools: order and labels ---------------------------------------------------------------------

def label_orders(loader: Iterable[Any], epochs: int = 2) -> list[np.ndarray]:
    """The labels each of `epochs` passes over `loader` delivered, in the order they arrived."""
    return [np.concatenate([np.asarray(labels) for _, labels in loader]) for _ in range(epochs)]


def same_position_share(first: np.ndarray, second: np.ndarray) -> float:
    """Share of positions where two epochs delivered the same label (over the shorter of the two)."""
    length = min(len(first), len(second))
    return float(np.mean(first[:length] == second[:length])) if length else 0.0


def chance_same_position(labels: np.ndarray) -> float:
    """The share `same_position_share` expects from two independent shuffles of `labels`: the sum over classes of
    each class's share squared (0.1 for ten equal classes)."""
    shares = np.bincount(labels) / len(labels)
    return float(np.sum(shares ** 2))


def labels_per_batch(loader: Iterable[Any], num_classes: int) -> np.ndarray:
    """(batches, num_classes): how many items of each class every batch of one pass held."""
    return np.stack([np.bincount(np.asarray(labels), minlength=num_classes) for _, labels in loader])


# ---- tools: augmented samples from each worker and epoch -------------------------------------------

class SameItem(Dataset):
    """`copies` reads of one item of `dataset`: fed to a loader with a pipeline's settings, every batch holds that
    item as augmented by whichever worker made the batch."""

    def __init__(self, dataset: Dataset, index: int, copies: int) -> None:
        self.dataset, self.index, self.copies = dataset, index, copies

    def __len__(self) -> int:
        return self.copies

    def __getitem__(self, _: int) -> Any:
        return self.dataset[self.index]


def augmented_views(loader: Iterable[Any], epochs: int = 2) -> np.ndarray:
    """uint8 (epochs, batches, batch size, H, W, 3): every image of every batch of `epochs` passes over a loader of
    `SameItem` reads. A DataLoader with W workers hands batch b to worker b % W and returns the batches in order."""
    return np.stack([np.stack([images.permute(0, 2, 3, 1).numpy() for images, _ in loader]) for _ in range(epochs)])


def view_repeats(views: np.ndarray) -> dict[str, bool]:
    """Whether the reads repeat: each batch's reads equal the first batch's (of the same epoch), each epoch's equal
    the first epoch's, and the reads within one batch all equal each other."""
    return {"across batches": all(np.array_equal(epoch[0], batch) for epoch in views for batch in epoch[1:]),
            "across epochs": all(np.array_equal(views[0], epoch) for epoch in views[1:]),
            "within a batch": all((batch == batch[0]).all() for epoch in views for batch in epoch)}


def show_views(views: np.ndarray, workers: int, title: str = "") -> Any:
    """A grid of `augmented_views`: a row per epoch and batch (named by the worker that made it), a column per read."""
    import matplotlib.pyplot as plt

    epochs, batches, reads = views.shape[:3]
    figure, axes = plt.subplots(epochs * batches, reads, figsize=(1.1 * reads, 1.1 * epochs * batches),
                                squeeze=False)
    for epoch in range(epochs):
        for batch in range(batches):
            row = epoch * batches + batch
            for read in range(reads):
                axes[row, read].imshow(views[epoch, batch, read])
                axes[row, read].set_xticks([])
                axes[row, read].set_yticks([])
            axes[row, 0].set_ylabel(f"epoch {epoch + 1}\nworker {batch % workers}", fontsize="small")
    figure.suptitle(title or "the same item, read again and again")
    figure.tight_layout()
    return figure


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


class Trained(NamedTuple):
    """A run trained by `train_and_record`: its records, the trained model, and each epoch's mean training loss."""

    run: TrainingRun
    model: nn.Module
    train_loss: list[float]


def train_and_record(make_model: Callable[[], nn.Module], train_loader: Iterable[Any], val_loader: Iterable[Any],
                     epochs: int, device: torch.device | str = "cpu", seed: int = SEED,
                     prepare: Callable[[torch.Tensor, Any], torch.Tensor] = model_input,
                     settings: Mapping[str, Any] | None = None, profile: str = "") -> Trained:
    """Train a fresh `make_model()` (seeded) with the fixed optimiser for `epochs`, evaluating after each.

    Each epoch's record holds the wall seconds since training began (evaluation included), the val accuracy, and
    the images/s and stall fraction of its training pass measured by a `StallMeter` (its first WARMUP_BATCHES
    batches left out); beside the records, the mean loss of each epoch's training steps, as a training loop prints
    it (read once per epoch, so the loop does not wait for the device every step)."""
    seed_everything(seed)
    device = torch.device(device)
    model = make_model().to(device)
    optimizer = make_optimizer(model)
    run = TrainingRun(profile=profile, settings={"device": str(device), "seed": seed, "epochs": epochs,
                                                 **(settings or {})})
    train_loss = []
    began = time.perf_counter()
    for epoch in range(1, epochs + 1):
        meter = StallMeter(skip_batches=WARMUP_BATCHES)
        counted, losses = 0, []
        for position, (images, labels) in enumerate(meter.iterate(train_loader)):
            losses.append(train_step(model, optimizer, prepare(images, device), torch.as_tensor(labels).to(device)))
            if device.type == "cuda":
                torch.cuda.synchronize()  # the step's time is the device's, not the launch's
            counted += len(labels) if position >= WARMUP_BATCHES else 0
        train_loss.append(float(torch.stack(losses).mean()))
        predicted, true = predictions(model, val_loader, device, prepare)
        busy = meter.wait_s + meter.step_s
        run.records.append(EpochRecord(epoch, time.perf_counter() - began, float(np.mean(predicted == true)),
                                       counted / busy if busy > 0 else 0.0, meter.stall_fraction))
    return Trained(run, model, train_loss)


def seed_verdict(name_a: str, scores_a: Sequence[float], name_b: str, scores_b: Sequence[float],
                 as_percent: bool = True) -> tuple[bool, str]:
    """Whether two settings' scores (one per seed each: accuracies as fractions, or losses with `as_percent=False`)
    are told apart by more than their seeds: every seed of one above every seed of the other. The verdict, and a
    sentence with the figures and the chance of that ordering where the settings do not differ at all."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    show = (lambda v: f"{v:.1%}") if as_percent else (lambda v: f"{v:.2f}")
    scale, unit = (100, " points") if as_percent else (1, "")
    chance = 2 / math.comb(len(a) + len(b), len(a))
    figures = (f"{name_a} {show(a.min())}-{show(a.max())} (mean {show(a.mean())}), {name_b} {show(b.min())}-"
               f"{show(b.max())} (mean {show(b.mean())}), {len(a)} and {len(b)} seeds: a gap of "
               f"{scale * (a.mean() - b.mean()):+.{1 if as_percent else 2}f}{unit}, each setting's seeds spread up to "
               f"{scale * max(np.ptp(a), np.ptp(b)):.{1 if as_percent else 2}f}{unit}")
    if a.min() > b.max() or b.min() > a.max():
        higher = name_a if a.mean() > b.mean() else name_b
        return True, (f"{figures}. Every seed of {higher} scored above every seed of the other; with no real "
                      f"difference that happens {chance:.0%} of the time.")
    return False, (f"{figures}. The seeds' ranges overlap: here the seed decides as much as the setting, so this run "
                   f"cannot tell them apart.")
