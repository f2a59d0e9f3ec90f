"""Exercise 11, reference solution: the training script with its ten defects fixed, the model, optimiser, seeds and
epoch budget unchanged (all in `loaderlab.training`).

- items stay uint8 to the end: JPEG draft mode decodes near the size needed, one resize to a short side of RESIZE,
  then a crop (random for train, centre for val) and a flip, as numpy views;
- an image that does not decode raises CorruptImage naming the file (default collate, nothing dropped);
- labels come from the file's own class folder, whatever the depth;
- crops and flips draw from torch's generator, which the DataLoader seeds anew in every worker (from the loader's
  seeded generator) and which continues from epoch to epoch; in this process (num_workers=0) from torch's global
  generator, seeded by `train`;
- the train loader shuffles every epoch (shuffle=True with a seeded generator); one worker per usable core, kept
  alive across epochs; pinned memory only for a CUDA device, non_blocking only from pinned memory;
- `to_model_input` copies the uint8 batch, then scales and normalises it at once on the device;
- `time_training` starts its clock after the warm-up batches.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from loaderlab.images import DECODE_ERRORS, CorruptImage, decode_failure_reason, list_samples
from loaderlab.machine import usable_cores
from loaderlab.paths import active_profile, dataset_dir
from loaderlab.device import mean_std_on
from loaderlab.training import (BATCH_SIZE, IMAGE_SIZE, MEAN, RESIZE, SEED, STD, WARMUP_BATCHES, EpochRecord,
                                SmallCNN, TrainingRun, epochs_for, make_optimizer, seed_everything, train_step)

WORKER_TIMEOUT_S = 120.0  # a worker silent this long is an error, not a reason to wait forever


def decode_resized(path: Path | str) -> np.ndarray:
    """The image as uint8 HWC RGB, its short side resized to RESIZE (decoded near that size with JPEG draft mode)."""
    try:
        with Image.open(path) as image:
            image.draft("RGB", (RESIZE, RESIZE))
            image = image.convert("RGB")
    except DECODE_ERRORS as err:
        raise CorruptImage(path, decode_failure_reason(path, err)) from err
    width, height = image.size
    scale = RESIZE / min(width, height)
    size = (max(RESIZE, round(width * scale)), max(RESIZE, round(height * scale)))
    return np.asarray(image.resize(size, Image.BILINEAR))


class ShapesFolder(Dataset):
    """(uint8 (3, IMAGE_SIZE, IMAGE_SIZE) image, label) items of split_dir/<class>/<file>.jpg; augmented when `train`."""

    def __init__(self, split_dir: Path | str, train: bool) -> None:
        self.split_dir = Path(split_dir)
        self.train = train
        self.classes = sorted(p.name for p in self.split_dir.iterdir() if p.is_dir())
        self.samples = list_samples(self.split_dir)  # labels from each file's class folder, at any depth
        self.targets = [label for _, label in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = self.decode(path)
        height, width = image.shape[:2]
        if self.train:
            top, left, flip = self.draw_crop_and_flip(height, width)
        else:
            top, left, flip = (height - IMAGE_SIZE) // 2, (width - IMAGE_SIZE) // 2, False
        image = image[top:top + IMAGE_SIZE, left:left + IMAGE_SIZE]
        if flip:
            image = image[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), label

    def decode(self, path: Path | str) -> np.ndarray:
        """The image an item is cropped from: uint8 HWC, its short side RESIZE."""
        return decode_resized(path)

    def draw_crop_and_flip(self, height: int, width: int) -> tuple[int, int, bool]:
        """A random crop's top and left, and whether to flip, from torch's generator (which the DataLoader seeds anew
        in every worker)."""
        top = int(torch.randint(height - IMAGE_SIZE + 1, ()))
        left = int(torch.randint(width - IMAGE_SIZE + 1, ()))
        return top, left, bool(torch.rand(()) < 0.5)


def make_loaders(data_dir: Path | str, device: torch.device | str, seed: int = SEED,
                 num_workers: int | None = None) -> tuple[DataLoader, DataLoader]:
    """(train_loader, val_loader) over data_dir/train and data_dir/val."""
    data_dir = Path(data_dir)
    return loaders_for(ShapesFolder(data_dir / "train", train=True), ShapesFolder(data_dir / "val", train=False),
                       device, seed, num_workers)


def loaders_for(train_set: Dataset, val_set: Dataset, device: torch.device | str, seed: int, num_workers: int | None,
                **worker_options: Any) -> tuple[DataLoader, DataLoader]:
    """The train loader (a new order every epoch, from `seed`) and the val loader (file order) over two datasets;
    `worker_options` add to or replace the DataLoader's worker settings (persistent workers, a timeout)."""
    workers = usable_cores() if num_workers is None else num_workers
    pin = torch.device(device).type == "cuda"
    options: dict[str, Any] = {}
    if workers:  # worker settings only where there are workers
        options = {"persistent_workers": True, "timeout": WORKER_TIMEOUT_S, **worker_options}
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True,
                              generator=torch.Generator().manual_seed(seed), num_workers=workers, pin_memory=pin,
                              **options)
    val_loader = DataLoader(val_set, batch_size=BATCH_SIZE, shuffle=False, num_workers=workers, pin_memory=pin,
                            **options)
    return train_loader, val_loader


def to_model_input(images: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A uint8 (N, 3, S, S) batch as float32 on `device`, scaled to 0..1 and normalised by MEAN and STD."""
    device = torch.device(device)
    images = images.to(device, non_blocking=images.is_pinned())
    mean, std = mean_std_on(device, MEAN, STD)  # made once per device: built per batch, a blocking copy each time
    return images.float().div_(255).sub_(mean).div_(std)


def train_one_epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loader: Any,
                    device: torch.device | str) -> int:
    """One training pass over `loader`; returns the images trained on."""
    images_seen = 0
    for images, labels in loader:
        train_step(model, optimizer, to_model_input(images, device), labels.to(device, non_blocking=labels.is_pinned()))
        images_seen += len(labels)
    return images_seen


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader: Any, device: torch.device | str) -> float:
    """Accuracy (0..1) of the model over the loader."""
    model.eval()
    correct = total = 0
    for images, labels in loader:
        predictions = model(to_model_input(images, device)).argmax(dim=1).cpu()
        correct += int((predictions == labels).sum())
        total += len(labels)
    return correct / total if total else 0.0


def time_training(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loader: Any, device: torch.device | str,
                  warmup_batches: int = WARMUP_BATCHES) -> float:
    """Train one pass over the loader; the images/s after the first `warmup_batches` batches."""
    start = None
    images_timed = 0
    for position, (images, labels) in enumerate(loader):
        if position == warmup_batches:
            start = time.perf_counter()
        loss = train_step(model, optimizer, to_model_input(images, device),
                          labels.to(device, non_blocking=labels.is_pinned()))
        if start is not None:
            images_timed += len(labels)
    if start is None:
        return float("nan")  # the pass had no batch beyond the warm-up
    float(loss)  # wait for the device's last step before reading the clock
    return images_timed / (time.perf_counter() - start)


def train(data_dir: Path | str, epochs: int, device: torch.device | str, seed: int = SEED) -> TrainingRun:
    """Train SmallCNN for `epochs`, evaluating after each; the run's records."""
    seed_everything(seed)
    device = torch.device(device)
    train_loader, val_loader = make_loaders(data_dir, device, seed)
    model = SmallCNN(len(train_loader.dataset.classes)).to(device)
    optimizer = make_optimizer(model)
    run = TrainingRun(profile=active_profile(), settings={
        "device": str(device), "seed": seed, "epochs": epochs, "num_workers": train_loader.num_workers})
    began = time.perf_counter()
    for epoch in range(1, epochs + 1):
        images_per_s = time_training(model, optimizer, train_loader, device)
        accuracy = evaluate(model, val_loader, device)
        record = EpochRecord(epoch, time.perf_counter() - began, accuracy, images_per_s)
        run.records.append(record)
        print(f"epoch {epoch}: val accuracy {accuracy:.1%}, {images_per_s:.0f} images/s, {record.wall_s:.1f} s",
              flush=True)
    return run


def main(argv: list[str] | None = None) -> TrainingRun:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=epochs_for(active_profile()),
                        help="epochs to train (default: the active profile's budget)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    return train(dataset_dir(), args.epochs, args.device)


if __name__ == "__main__":
    main(sys.argv[1:])
