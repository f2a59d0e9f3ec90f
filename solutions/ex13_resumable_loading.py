"""Exercise 13: resumable loading (reference solution).

The state is four ints: the dataset's length, the seed, the epoch, and the samples the training loop has
received in that epoch. The order is a permutation drawn from (seed, epoch) alone, so it needs no saving:
resuming draws it again and hands the DataLoader only its unread tail as the sampler.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import torch
from torch.utils.data import DataLoader

# What a state holds, and the type of each value. Counting samples (not batches) lets a run resume with
# another batch size: the rest starts at the first sample the loop had not received.
STATE_TYPES = {"dataset_size": int, "seed": int, "epoch": int, "samples_received": int}


class ResumableLoader:
    """Batches of a map-style `dataset` in an order drawn from (seed, epoch) alone, through a torch DataLoader
    with `num_workers` workers, that can be saved mid-epoch and resumed exactly."""

    def __init__(self, dataset: Sized, batch_size: int, seed: int = 0, num_workers: int = 0) -> None:
        self.dataset, self.batch_size, self.seed, self.num_workers = dataset, batch_size, seed, num_workers
        self.epoch = 0
        self.samples_received = 0   # in the current epoch, counted where the training loop receives them
        self._resume_at = 0         # where the next iter() starts: the loaded position, then 0 again

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration follows; the saved position is kept only for the saved epoch."""
        if epoch != self.epoch:
            self.epoch, self.samples_received, self._resume_at = epoch, 0, 0

    def epoch_order(self) -> list[int]:
        """The epoch's order of the dataset's indices: a permutation drawn from (seed, epoch) alone."""
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(len(self.dataset), generator=generator).tolist()

    def __iter__(self) -> Iterator[Any]:
        start, self._resume_at = self._resume_at, 0
        remaining = self.epoch_order()[start:]   # the skipped samples are never read: the sampler starts here
        loader = DataLoader(self.dataset, batch_size=self.batch_size, sampler=remaining,
                            num_workers=self.num_workers, timeout=60 if self.num_workers else 0)
        self.samples_received = start
        # With workers the sampler runs ahead of this loop: with 2 workers, after the loop received k batches
        # the sampler had handed out k + 4 (prefetch_factor 2 x 2 workers; measured on torch 2.14.1). So the
        # count is kept here, one batch at a time as the loop receives it, never read from the sampler.
        for batch in loader:
            self.samples_received += min(self.batch_size, len(self.dataset) - self.samples_received)
            yield batch

    def __len__(self) -> int:
        return -(-len(self.dataset) // self.batch_size)

    def state_dict(self) -> dict[str, int]:
        return {"dataset_size": len(self.dataset), "seed": self.seed, "epoch": self.epoch,
                "samples_received": self.samples_received}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"a loader state is a dict, got {type(state).__name__}")
        for key, kind in STATE_TYPES.items():
            if key not in state:
                raise ValueError(f"the state has no {key!r} (it holds {sorted(state)})")
            if type(state[key]) is not kind:
                raise ValueError(f"the state's {key!r} is {state[key]!r}, a {type(state[key]).__name__}, not an int")
        if state["dataset_size"] != len(self.dataset):
            raise ValueError(f"the state was saved for a dataset of {state['dataset_size']} samples; "
                             f"this loader's holds {len(self.dataset)}")
        if state["seed"] != self.seed:
            raise ValueError(f"the state was saved with seed {state['seed']}; this loader has seed {self.seed}")
        if not 0 <= state["samples_received"] <= len(self.dataset):
            raise ValueError(f"the state's samples_received is {state['samples_received']}, outside "
                             f"0..{len(self.dataset)} (the epoch's length)")
        if state["epoch"] < 0:
            raise ValueError(f"the state's epoch is {state['epoch']}, below 0")
        self.epoch = state["epoch"]
        self.samples_received = self._resume_at = state["samples_received"]
