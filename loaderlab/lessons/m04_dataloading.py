"""Datasets, collate functions and timers for notebooks 04 and 04b: what a DataLoader is fed, measured.

Top-level classes and functions, so that DataLoader workers can import them under spawn
(macOS, Windows) as well as fork. The image datasets yield `(uint8 image, int label)`.
"""

from __future__ import annotations

import io
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.profiler import record_function
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from loaderlab.baselines import IMAGENET_MEAN, IMAGENET_STD
from loaderlab.bench import count_batch, measure
from loaderlab.images import CROP, Sample, reference_crop, resize_center_crop
from loaderlab.lessons.m04_pitfalls import uint8_to_normalised
from loaderlab.trace import Tracer, span

# ---- timing ---------------------------------------------------------------------------------------


def ms_per_call(function: Callable[[Any], Any], inputs: Sequence[Any], threads: int = 1) -> float:
    """Milliseconds per call of `function` over `inputs` (after one untimed call), torch on `threads` threads.

    One thread by default, as in a DataLoader worker (torch sets 1 there).
    """
    with torch_threads(threads):
        function(inputs[0])
        start = time.perf_counter()
        for item in inputs:
            function(item)
        return 1000 * (time.perf_counter() - start) / len(inputs)


def epoch_ips(make_loader: Callable[[], Iterable[Any]], epochs: int = 1) -> float:
    """Images/s over whole epochs of a fresh `make_loader()` each, worker start-up included; median of `epochs`."""
    return statistics.median(measure(make_loader, count=count_batch).items_per_s for _ in range(epochs))


def cold_and_steady_ips(loader: Iterable[Any], epochs: int = 1) -> tuple[float, float]:
    """Images/s of `loader`'s first epoch (worker start-up included), then of the following ones (median of `epochs`).

    Give it a loader with `persistent_workers=True` (or none): otherwise every epoch starts its workers again.
    """
    cold = measure(lambda: loader, count=count_batch).items_per_s
    return cold, statistics.median(measure(lambda: loader, count=count_batch).items_per_s for _ in range(epochs))


def steady_ips(loader: Iterable[Any], epochs: int = 1) -> float:
    """Images/s of `loader` after one untimed epoch (workers started, page cache warm); median of `epochs`."""
    return cold_and_steady_ips(loader, epochs)[1]


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads in this process set to `threads` for the block, then restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---- in-memory datasets -------------------------------------------------------------------------------


def decode_all(samples: Sequence[Sample]) -> np.ndarray:
    """Every sample's reference centre crop, decoded once, in one uint8 (N, 3, 224, 224) array (channels first)."""
    images = np.empty((len(samples), 3, CROP, CROP), dtype=np.uint8)
    for i, (path, _) in enumerate(samples):
        images[i] = reference_crop(path).transpose(2, 0, 1)
    return images


class InMemoryCrops(Dataset):
    """Decoded crops held in one uint8 (N, 3, H, W) array; with `augment`, a random flip in `__getitem__`.

    The flip is drawn at every access from `self.rng` (which `loaderlab.lessons.m04_pitfalls.reseed_worker` replaces
    in each worker), so an image comes out flipped in some epochs and not in others. Labels are one int64
    array, not a list of Python ints (see copy-on-read, notebook 04).
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, augment: bool = False, seed: int = 0) -> None:
        self.images, self.labels, self.augment = images, labels, augment
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index]
        if self.augment and self.rng.random() < 0.5:
            image = image[:, :, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image)), int(self.labels[index])


class FrozenAugmentation(InMemoryCrops):
    """THE TRAP: the random flip is drawn once, in `__init__`, and baked into the cached pixels.

    Every epoch then serves the very same flipped and unflipped images: augmentation frozen for
    the whole training run, with nothing to warn you.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, seed: int = 0) -> None:
        super().__init__(images.copy(), labels, augment=False, seed=seed)
        flip = self.rng.random(len(self.images)) < 0.5
        self.images[flip] = self.images[flip][:, :, :, ::-1]


def share_unchanged(first: Sequence[torch.Tensor], second: Sequence[torch.Tensor]) -> float:
    """Share of images identical in two epochs of one unshuffled loader (batches or single images)."""
    same = [torch.equal(a, b) for x, y in zip(first, second, strict=True) for a, b in zip(x, y, strict=True)]
    return sum(same) / len(same)


class CropStream(IterableDataset):
    """The in-memory crops as a stream: `__iter__` yields `(image, label)` in index order, with no `__getitem__`.

    A DataLoader runs `__iter__` once in every worker. With `split_by_worker`, worker k of n yields
    indices k, k + n, k + 2n...; without it, every worker yields the whole stream, so the epoch
    holds each sample once per worker.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, split_by_worker: bool = True) -> None:
        self.images, self.labels, self.split_by_worker = images, labels, split_by_worker

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        info = get_worker_info()
        first, step = (info.id, info.num_workers) if info is not None and self.split_by_worker else (0, 1)
        for index in range(first, len(self.labels), step):
            yield torch.from_numpy(self.images[index]), int(self.labels[index])


# ---- collate ------------------------------------------------------------------------------------------


class DecodedHWC(Dataset):
    """Decoded crops as Pillow and OpenCV give them: uint8 (H, W, 3) arrays, channels last."""

    def __init__(self, images_chw: np.ndarray, labels: np.ndarray) -> None:
        self.images = np.ascontiguousarray(images_chw.transpose(0, 2, 3, 1))
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.images[index], int(self.labels[index])


def to_chw_tensor(sample: tuple[np.ndarray, int]) -> tuple[torch.Tensor, int]:
    """What most `__getitem__`s end with, for the default collate: a contiguous CHW tensor per sample (a copy)."""
    image, label = sample
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label


class PerSampleTensors(Dataset):
    """`DecodedHWC`'s samples, each made into its own CHW tensor: the default collate then stacks them."""

    def __init__(self, hwc: DecodedHWC) -> None:
        self.hwc = hwc

    def __len__(self) -> int:
        return len(self.hwc)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return to_chw_tensor(self.hwc[index])


def collate_into_uint8(batch: Sequence[tuple[np.ndarray, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """collate_fn: (H, W, C) uint8 samples written straight into one pre-allocated uint8 (N, C, H, W) batch.

    Each sample is transposed while it is copied: one copy per sample, no per-sample tensor. In a
    worker the batch is allocated in shared memory, as the default collate does, so handing it to
    the main process copies nothing more.
    """
    height, width, channels = batch[0][0].shape
    shape = (len(batch), channels, height, width)
    if get_worker_info() is None:
        images = torch.empty(shape, dtype=torch.uint8)
    else:  # allocated in shared memory from the start, as default_collate does (share_memory_() would copy)
        images = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(int(np.prod(shape)))).view(shape)
    out = images.numpy()
    for i, (image, _) in enumerate(batch):
        out[i] = image.transpose(2, 0, 1)
    return images, torch.tensor([label for _, label in batch], dtype=torch.int64)


# ---- order, profiling, threads ------------------------------------------------------------------------


class Straggling(Dataset):
    """`dataset`, with every `every`-th sample held up by `seconds` of sleep: an emulated slow read
    (a cold network file, a retried request); a sleep leaves the CPU free, as waiting on I/O does."""

    def __init__(self, dataset: Dataset, every: int, seconds: float) -> None:
        self.dataset, self.every, self.seconds = dataset, every, seconds

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        if index % self.every == self.every - 1:
            time.sleep(self.seconds)
        return self.dataset[index]


def train_epoch(loader: Iterable[Any], step: Callable[[Any], Any]) -> tuple[float, float, list[Any]]:
    """One epoch of `step(batch)` over `loader`: (wall seconds, seconds spent waiting for batches, the batches'
    labels' first values in arrival order)."""
    waited, arrivals = 0.0, []
    start = time.perf_counter()
    iterator = iter(loader)
    while True:
        asked = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            break
        waited += time.perf_counter() - asked
        arrivals.append(int(batch[1][0]))
        step(batch)
    return time.perf_counter() - start, waited, arrivals


class StagedFolder(Dataset):
    """Reference centre crops from files, each stage labelled for `torch.profiler` (`record_function`) and,
    given a `Tracer`, recorded as a span too: "read", "decode", "transform", "to tensor"."""

    def __init__(self, samples: Sequence[Sample], tracer: Tracer | None = None) -> None:
        self.paths = [str(path) for path, _ in samples]
        self.labels = np.array([label for _, label in samples], dtype=np.int64)
        self.tracer = tracer

    def __len__(self) -> int:
        return len(self.paths)

    @contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        with record_function(name), span(self.tracer, name):
            yield

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with self._stage("read"), open(self.paths[index], "rb") as handle:
            data = handle.read()
        with self._stage("decode"):
            image = Image.open(io.BytesIO(data)).convert("RGB")
        with self._stage("transform"):
            image = resize_center_crop(image)
        with self._stage("to tensor"):
            tensor = torch.from_numpy(np.asarray(image).transpose(2, 0, 1).copy())
        return tensor, int(self.labels[index])


class CpuTrainingStep:
    """A training step run on the CPU, in the main process: normalise the uint8 batch, then a few
    convolutions (forward only). torch spreads it over `torch.get_num_threads()` threads."""

    def __init__(self, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.conv = torch.nn.Conv2d(3, 16, kernel_size=5, stride=2)

    def __call__(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        with torch.no_grad():
            images = uint8_to_normalised(batch[0], IMAGENET_MEAN, IMAGENET_STD)
            for _ in range(3):
                self.conv(images)


class ThreadsHere(Dataset):
    """Every item is (torch's intra-op threads, OpenCV's threads or -1 without OpenCV) where it is loaded."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> tuple[int, int]:
        try:
            import cv2
        except ImportError:
            return torch.get_num_threads(), -1
        return torch.get_num_threads(), cv2.getNumThreads()


# ---- Albumentations -----------------------------------------------------------------------------------


def import_albumentations() -> ModuleType | None:
    """The `albumentations` module, or None where it is not installed.

    Its import would otherwise ask PyPI for a newer version (a network call at import time); this
    sets NO_ALBUMENTATIONS_UPDATE=1 first, as its own message suggests, unless you set it yourself.
    """
    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
    try:
        import albumentations
    except ImportError:
        return None
    return albumentations
