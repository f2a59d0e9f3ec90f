"""`make capstone`: train your exercise-11 script for the active profile's full epoch budget, measured from outside.

    python -m grader.capstone [--target exercises] [--epochs N] [--device cpu|cuda] [--seed S]

It drives your script's own pieces (`make_loaders`, `time_training`, `evaluate`) with the fixed model, optimiser,
seed and budget of `loaderlab.training`, and measures what your code does not report itself: the share of each
epoch spent waiting for data (`loaderlab.training.StallMeter`). It prints, per epoch, val accuracy, images/s, stall
and wall time, then the time to reach each accuracy level, and saves the run to `.grader/capstone.json`.

That file's format is `loaderlab.training.TrainingRun.to_dict()` (profile, settings, records: one per epoch with
epoch, wall_s, val_accuracy, images_per_s, stall_fraction); the playbook (`make playbook`) reads it.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from loaderlab.paths import GRADER_DIR, REPO_ROOT, active_profile, dataset_dir
from loaderlab.training import (SEED, WARMUP_BATCHES, EpochRecord, SmallCNN, StallMeter, TrainingRun, epochs_for,
                                make_optimizer, seed_everything, time_to_accuracy)

EXERCISE = "ex11_training_script"
RUN_FILE = GRADER_DIR / "capstone.json"
REPORTED_LEVELS = (0.3, 0.5, 0.7, 0.9)  # time to accuracy is printed for each level the run reached


def train_measured(ex: ModuleType, data_dir: Path, epochs: int, device: torch.device | str, seed: int = SEED,
                   progress: Callable[[EpochRecord], None] | None = None) -> TrainingRun:
    """Train the fixed model for `epochs` with the script's loaders, input step, timing and evaluation; every
    epoch's stall fraction measured here, from outside the script (warm-up batches left out, as in time_training)."""
    device = torch.device(device)
    seed_everything(seed)
    train_loader, val_loader = ex.make_loaders(data_dir, device, seed)
    model = SmallCNN(len(train_loader.dataset.classes)).to(device)
    optimizer = make_optimizer(model)
    run = TrainingRun(profile=active_profile(), settings={
        "device": str(device), "seed": seed, "epochs": epochs, "num_workers": getattr(train_loader, "num_workers", None),
        "pin_memory": getattr(train_loader, "pin_memory", None), "torch_threads": torch.get_num_threads()})
    try:
        began = time.perf_counter()
        for epoch in range(1, epochs + 1):
            meter = StallMeter(skip_batches=WARMUP_BATCHES)
            images_per_s = ex.time_training(model, optimizer, meter.wrap(train_loader), device)
            accuracy = ex.evaluate(model, val_loader, device)
            record = EpochRecord(epoch, time.perf_counter() - began, float(accuracy), float(images_per_s),
                                 meter.stall_fraction)
            run.records.append(record)
            if progress:
                progress(record)
    finally:
        del train_loader, val_loader
        gc.collect()  # persistent workers stop when their loader is collected
    return run


def describe(record: EpochRecord) -> str:
    stall = "-" if record.stall_fraction is None else f"{record.stall_fraction:.0%}"
    return (f"epoch {record.epoch:>3}: val accuracy {record.val_accuracy:6.1%}, {record.images_per_s:7.0f} images/s, "
            f"stall {stall:>4}, {record.wall_s:7.1f} s")


def load_exercise(target: Path) -> ModuleType:
    sys.path.insert(0, str(target))
    return importlib.import_module(EXERCISE)


def main(argv: list[str] | None = None) -> TrainingRun:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="exercises", help="folder holding ex11_training_script.py")
    parser.add_argument("--epochs", type=int, default=None, help="default: the active profile's budget")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", default=str(RUN_FILE), help=f"where to save the run (default {RUN_FILE})")
    args = parser.parse_args(argv)
    target = Path(args.target) if Path(args.target).is_absolute() else REPO_ROOT / args.target
    profile = active_profile()
    epochs = args.epochs or epochs_for(profile)
    print(f"training {target.name}/{EXERCISE}.py on the '{profile}' data for {epochs} epochs on {args.device}")
    run = train_measured(load_exercise(target), dataset_dir(), epochs, args.device, args.seed,
                         progress=lambda record: print(describe(record), flush=True))
    for level in REPORTED_LEVELS:
        reached = time_to_accuracy(run, level)
        print(f"time to {level:.0%} val accuracy: " + (f"{reached:.1f} s" if reached is not None else "not reached"))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(run.to_dict(), indent=2))
    print(f"saved to {out}")
    return run


if __name__ == "__main__":
    main(sys.argv[1:])
