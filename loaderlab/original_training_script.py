"""Exercise 11 (capstone, module 08): fix a real training script, measured by time to accuracy.

This script works: `python -m exercises.ex11_training_script [--epochs N]` trains `SmallCNN` on the active
profile's data (`loaderlab.paths.dataset_dir()`, its `train` and `val` folders) and prints, per epoch, the val
accuracy, the training images/s and the wall time. It is also slow and subtly wrong, in ten places, and nothing
marks them: the TODO below the imports lists what you would notice running it. Finding each cause is the exercise:
reproduce a symptom and measure it (notebook 08's tools), find the code that causes it, then fix it with what
modules 01-07 taught. `make grade EX=ex11` measures each symptom on its own, then times your script against this
original and trains it for the profile's epoch budget; its messages say what it observed, not why. Stuck on one,
`make hint EX=ex11 CHECK=<the check> LEVEL=1` says where to look and how to measure it; levels 2 and 3 give the
cause, then the fix.

Fixed (do not change them, the grader relies on them): the model, optimiser, seeds, batch size, image sizes and
epoch budget, all in `loaderlab.training`.

The contract (keep these names and signatures; fix the bodies):

- `ShapesFolder(split_dir, train)`: a Dataset of `(image, label)` over `split_dir/<class>/<file>.jpg`. `classes`
  are the sorted class folder names, `targets` each item's label (its class folder's index in `classes`).
  Items are uint8 tensors of shape (3, IMAGE_SIZE, IMAGE_SIZE): the image resized to a short side of RESIZE, then
  with `train=True` a random IMAGE_SIZE crop and a random horizontal flip drawn anew on every read (in every worker,
  every epoch), with `train=False` the centre crop, the same every time.
  An image that does not decode raises an error that names its file. Every kind of file the dataset mixes
  (`data_gen.encodings`: progressive, 4:2:2 and 4:4:4, grayscale, Adobe CMYK and YCCK, EXIF-tagged camera files, a
  PNG under a .jpg name) gives the reference's pixels (`loaderlab.images`: read by its content, kept as stored with
  no EXIF rotation, grayscale as three equal channels, CMYK as Pillow converts it).
- `make_loaders(data_dir, device, seed=SEED, num_workers=None) -> (train_loader, val_loader)`: DataLoaders of
  batches of BATCH_SIZE; the train loader shuffles every epoch (a new permutation, seeded by `seed`), the val loader
  keeps file order. `num_workers=None` means one worker process per usable core (`loaderlab.machine.usable_cores`),
  kept alive from epoch to epoch (workers, where there are any, persist); `pin_memory` only when `device` is CUDA.
- `to_model_input(images, device) -> torch.Tensor`: a uint8 (N, 3, S, S) batch to float32 on `device`, scaled to
  0..1 and normalised by MEAN and STD, the whole batch at once, after the copy.
- `train_one_epoch(model, optimizer, loader, device)`: one pass of `loaderlab.training.train_step` over the loader.
- `evaluate(model, loader, device) -> float`: accuracy (0..1) over the loader.
- `time_training(model, optimizer, loader, device, warmup_batches=WARMUP_BATCHES) -> float`: trains one pass of
  the loader and returns the images/s of the steady state (the first `warmup_batches` batches left out).
- `train(data_dir, epochs, device, seed=SEED) -> TrainingRun` and `main(argv)`: the whole run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, default_collate
from torchvision import transforms
from torchvision.transforms import functional as F

from loaderlab.paths import active_profile, dataset_dir
from loaderlab.training import (BATCH_SIZE, IMAGE_SIZE, MEAN, RESIZE, SEED, STD, WARMUP_BATCHES, EpochRecord,
                                SmallCNN, TrainingRun, epochs_for, make_optimizer, seed_everything, train_step)

# TODO(ex11, steps 1-10): what a practitioner running this script would notice. Reproduce and measure each symptom
# before you change anything, then find its cause:
# - the loop waits for data much of each epoch (`make capstone`'s stall column), and one item costs far more time
#   and bytes than the 64x64 picture it ends as;
# - a core monitor (top, Activity Monitor) while it trains: one core busy, the others idle;
# - a train folder holding a damaged JPEG: the epoch ends without a word, with fewer images than the folder holds;
# - the same data linked somewhere else (another disk, a folder or two deeper): it fails to start, or a class never
#   appears among the labels;
# - augmented samples side by side: one train item read again shows the same crop; two workers, or two epochs, hand
#   out the same crops;
# - the labels of the first batch in two epochs: the same sequence;
# - one model evaluated twice on the val loader: two different accuracies;
# - the copy to the device: torch warns about pinned memory on a machine without a GPU;
# - the images/s it reports: a short run reads slower than a long one over the same loader.
# Notebook 08's tools measure them: the loop with data only, the model only and both (StallMeter's stall share); two
# epochs' orders side by side; augmented samples from two workers; one model evaluated twice.

CLASS_POSITION = len(str(dataset_dir(check=False)).split(os.sep)) + 1


class ShapesFolder(Dataset):
    """(image, label) items of split_dir/<class>/<file>.jpg; augmented when `train`."""

    def __init__(self, split_dir: Path | str, train: bool) -> None:
        self.split_dir = Path(split_dir)
        self.train = train
        self.classes = sorted(p.name for p in self.split_dir.iterdir() if p.is_dir())
        paths = sorted(str(p) for p in self.split_dir.glob("*/*.jpg"))
        self.rng = np.random.default_rng(SEED)
        self.rng.shuffle(paths)
        self.paths = paths
        self.targets = [self.classes.index(path.split(os.sep)[CLASS_POSITION]) for path in paths]
        self.top, self.left = (int(v) for v in self.rng.integers(0, RESIZE - IMAGE_SIZE + 1, size=2))
        self.to_tensor = transforms.ToTensor()
        self.normalize = transforms.Normalize(MEAN, STD)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Any:
        path = self.paths[index]
        try:
            image = Image.open(path).convert("RGB")
        except Exception:
            return None
        tensor = F.resize(self.to_tensor(image), RESIZE, antialias=True)
        tensor = F.crop(tensor, self.top, self.left, IMAGE_SIZE, IMAGE_SIZE)
        if self.rng.random() < 0.5:
            tensor = F.hflip(tensor)
        return self.normalize(tensor), self.targets[index]


def collate_skipping_none(batch: list[Any]) -> Any:
    """Collate the items that loaded."""
    return default_collate([item for item in batch if item is not None])


def make_loaders(data_dir: Path | str, device: torch.device | str, seed: int = SEED,
                 num_workers: int | None = None) -> tuple[DataLoader, DataLoader]:
    """(train_loader, val_loader) over data_dir/train and data_dir/val."""
    data_dir = Path(data_dir)
    workers = 0 if num_workers is None else num_workers
    loaders = []
    for split, train in (("train", True), ("val", False)):
        loaders.append(DataLoader(
            ShapesFolder(data_dir / split, train=train), batch_size=BATCH_SIZE,
            shuffle=False,
            num_workers=workers, collate_fn=collate_skipping_none,
            generator=torch.Generator().manual_seed(seed),
            pin_memory=True))
    return loaders[0], loaders[1]


def to_model_input(images: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A batch of images as the model's input on `device`."""
    return images.to(device, non_blocking=True)


def train_one_epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loader: Any,
                    device: torch.device | str) -> int:
    """One training pass over `loader`; returns the images trained on."""
    images_seen = 0
    for images, labels in loader:
        train_step(model, optimizer, to_model_input(images, device), labels.to(device))
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
    """Train one pass over the loader; the images/s of its steady state."""
    start = time.perf_counter()
    images_seen = 0
    for images, labels in loader:
        train_step(model, optimizer, to_model_input(images, device), labels.to(device))
        images_seen += len(labels)
    return images_seen / (time.perf_counter() - start)


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
