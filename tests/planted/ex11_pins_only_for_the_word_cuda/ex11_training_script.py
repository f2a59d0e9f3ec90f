"""Planted: pin_memory when str(device) == "cuda": right for torch.device("cuda") and "cuda", wrong for "cuda:0"
(a device with an index is CUDA too)."""

from pathlib import Path

from torch.utils.data import DataLoader

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import BATCH_SIZE, SEED, WORKER_TIMEOUT_S, ShapesFolder, usable_cores

import torch


def make_loaders(data_dir, device, seed=SEED, num_workers=None):
    data_dir = Path(data_dir)
    workers = usable_cores() if num_workers is None else num_workers
    pin = str(device) == "cuda"  # planted: the type, not the name, says CUDA
    options = {"persistent_workers": True, "timeout": WORKER_TIMEOUT_S} if workers else {}
    train = DataLoader(ShapesFolder(data_dir / "train", train=True), batch_size=BATCH_SIZE, shuffle=True,
                       generator=torch.Generator().manual_seed(seed), num_workers=workers, pin_memory=pin, **options)
    val = DataLoader(ShapesFolder(data_dir / "val", train=False), batch_size=BATCH_SIZE, shuffle=False,
                     num_workers=workers, pin_memory=pin, **options)
    return train, val
