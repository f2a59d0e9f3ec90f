"""The capstone's fixed parts (module 08): the model, the optimiser, the constants, the records of a training run,
the stall meter and the time-to-accuracy chart. A learner fixes `exercises/ex11_training_script.py` and never
changes these: the model, optimiser, seeds and epoch budget stay the same, so only the data side can move the
time to accuracy.

A run's file format (`.grader/capstone.json`, written by `python -m grader.capstone` and read by the playbook)
is `TrainingRun.to_dict()`: {"profile", "settings", "records": [EpochRecord fields, ...]}.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

IMAGE_SIZE = 64            # the model's input: IMAGE_SIZE x IMAGE_SIZE crops ...
RESIZE = 72                # ... of the image resized to this short side
MEAN = (0.485, 0.456, 0.406)  # per channel, on the 0..1 scale
STD = (0.229, 0.224, 0.225)
BATCH_SIZE = 32
SEED = 0
# The epoch budget per dataset profile (`loaderlab.paths.active_profile()`); see grader/checks/ex11_training_script.py
# for the accuracy each budget reaches.
EPOCHS = {"ci": 12, "workshop": 8}
WARMUP_BATCHES = 2         # batches left out of a throughput figure: worker start-up, first allocations


def epochs_for(profile: str) -> int:
    """The epoch budget of a profile (the workshop's for a profile this table does not name)."""
    return EPOCHS.get(profile, EPOCHS["workshop"])


class SmallCNN(nn.Module):
    """Three conv blocks (16, 32, 64 channels; BatchNorm, ReLU, 2x2 max-pool), global average pool, linear."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        channels = 3
        for width in (16, 32, 64):
            blocks += [nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                       nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            channels = width
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).mean(dim=(2, 3)))


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum, the same for every run."""
    return torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """One SGD step on a batch that is already model input (float, normalised, on the model's device).

    Returns the loss as a tensor on that device: reading it (`float(loss)`) would wait for the device every step."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss.detach()


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (the model's initial weights come from torch's)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---- records of a run --------------------------------------------------------------------------

@dataclass(frozen=True)
class EpochRecord:
    """One epoch: its number (from 1), wall seconds since training began, val accuracy (0..1), training images/s,
    and the share of the step loop spent waiting for batches (None where nothing measured it)."""

    epoch: int
    wall_s: float
    val_accuracy: float
    images_per_s: float
    stall_fraction: float | None = None


@dataclass
class TrainingRun:
    """A training run: its epochs, the dataset profile, and the settings that made it (workers, device, seed...)."""

    records: list[EpochRecord] = field(default_factory=list)
    profile: str = ""
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; the format of `.grader/capstone.json`."""
        return {"profile": self.profile, "settings": dict(self.settings),
                "records": [asdict(record) for record in self.records]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainingRun:
        return cls([EpochRecord(**record) for record in data.get("records", [])], str(data.get("profile", "")),
                   dict(data.get("settings", {})))

    @property
    def final_accuracy(self) -> float | None:
        return self.records[-1].val_accuracy if self.records else None


def time_to_accuracy(run: TrainingRun, level: float) -> float | None:
    """Wall seconds until the first epoch whose val accuracy reached `level`; None if none did."""
    return next((record.wall_s for record in run.records if record.val_accuracy >= level), None)


# ---- where the time goes -----------------------------------------------------------------------

class StallMeter:
    """Measures a training loop from outside: seconds spent waiting for the next batch, and seconds between
    receiving a batch and asking for the next one (the step). `stall_fraction = wait / (wait + step)`.

    `meter.wrap(loader)` is an iterable to hand to the loop instead of the loader (it forwards `len` and
    attributes); its first `skip_batches` batches per pass are left out (worker start-up is not a stall).
    """

    def __init__(self, skip_batches: int = 0) -> None:
        self.skip_batches = skip_batches
        self.wait_s = 0.0
        self.step_s = 0.0
        self.batches = 0

    @property
    def stall_fraction(self) -> float:
        total = self.wait_s + self.step_s
        return self.wait_s / total if total > 0 else 0.0

    def iterate(self, loader: Iterable[Any]) -> Iterator[Any]:
        """Yield the loader's batches, timing the waits for them and the steps between them."""
        iterator = iter(loader)
        position = 0
        while True:
            asked = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            received = time.perf_counter()
            yield batch
            if position >= self.skip_batches:
                self.wait_s += received - asked
                self.step_s += time.perf_counter() - received
                self.batches += 1
            position += 1

    def wrap(self, loader: Any) -> _Metered:
        return _Metered(self, loader)

    def summary(self) -> str:
        return (f"{self.batches} batches: {self.wait_s:.2f} s waiting for data, {self.step_s:.2f} s in the step, "
                f"stall fraction {self.stall_fraction:.0%}")


class _Metered:
    """A loader seen through a StallMeter: iterating it is measured; everything else is the loader's."""

    def __init__(self, meter: StallMeter, loader: Any) -> None:
        self._meter, self._loader = meter, loader

    def __iter__(self) -> Iterator[Any]:
        return self._meter.iterate(self._loader)

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


# ---- charts --------------------------------------------------------------------------------------

def plot_time_to_accuracy(runs: Mapping[str, TrainingRun], ax: Any = None, title: str = "") -> Any:
    """Val accuracy per epoch against wall seconds, one line per run, on one chart."""
    import matplotlib.pyplot as plt

    ax = ax if ax is not None else plt.subplots(figsize=(7, 4))[1]
    for name, run in runs.items():
        ax.plot([0.0, *(r.wall_s for r in run.records)], [0.0, *(r.val_accuracy for r in run.records)],
                marker="o", label=name)
    ax.set_xlabel("wall time since training began (s)")
    ax.set_ylabel("validation accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(title or "time to accuracy")
    ax.grid(alpha=0.3)
    ax.legend()
    return ax
