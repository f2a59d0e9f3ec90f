"""Exercise 13, another route: a numpy permutation seeded with [seed, epoch], a state that counts BATCHES and
records the batch size they had (so another batch size can still resume at the right sample), a format tag
among the keys, a Sampler subclass that starts at an offset, and an iterator class instead of a generator."""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import numpy as np
from torch.utils.data import DataLoader, Sampler

FORMAT = "resumable-loader/1"


class OffsetPermutation(Sampler[int]):
    """The epoch's permutation from its `start`-th sample on."""

    def __init__(self, size: int, seed: int, epoch: int, start: int) -> None:
        self.order = np.random.default_rng([seed, epoch]).permutation(size)[start:]

    def __iter__(self) -> Iterator[int]:
        return iter(self.order.tolist())

    def __len__(self) -> int:
        return len(self.order)


class _Epoch:
    """One pass: counts each batch as the loop takes it."""

    def __init__(self, owner: "ResumableLoader", loader: DataLoader) -> None:
        self.owner, self.batches = owner, iter(loader)

    def __iter__(self) -> "_Epoch":
        return self

    def __next__(self) -> Any:
        batch = next(self.batches)
        self.owner._batches_received += 1
        return batch


class ResumableLoader:
    def __init__(self, dataset: Sized, batch_size: int, seed: int = 0, num_workers: int = 0) -> None:
        self.dataset, self.batch_size, self.seed, self.num_workers = dataset, batch_size, seed, num_workers
        self.epoch = 0
        self._offset = 0              # samples before the first batch of this pass (a resume starts past 0)
        self._batches_received = 0    # batches the loop took in this pass
        self._pending: int | None = None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self._offset, self._batches_received, self._pending = epoch, 0, 0, None

    def _samples_received(self) -> int:
        return min(len(self.dataset), self._offset + self._batches_received * self.batch_size)

    def __iter__(self) -> _Epoch:
        self._offset, self._pending = (self._pending or 0), None
        self._batches_received = 0
        sampler = OffsetPermutation(len(self.dataset), self.seed, self.epoch, self._offset)
        return _Epoch(self, DataLoader(self.dataset, batch_size=self.batch_size, sampler=sampler,
                                       num_workers=self.num_workers, timeout=30 if self.num_workers else 0))

    def __len__(self) -> int:
        return (len(self.dataset) + self.batch_size - 1) // self.batch_size

    def state_dict(self) -> dict[str, Any]:
        samples = self._samples_received() if self._pending is None else self._pending
        # Whole batches of this loader's size; a pass resumed mid-batch (after another batch size) counts batches of 1.
        size = self.batch_size if samples % self.batch_size == 0 or samples == len(self.dataset) else 1
        return {"format": FORMAT, "length": len(self.dataset), "epoch": self.epoch,
                "batches_done": -(-samples // size), "batch_size": size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        expected = {"format": str, "length": int, "epoch": int, "batches_done": int, "batch_size": int}
        problems = [f"{key!r} missing" for key in expected if key not in state]
        problems += [f"{key!r} is {state[key]!r}, not {kind.__name__}" for key, kind in expected.items()
                     if key in state and type(state[key]) is not kind]
        if problems:
            raise ValueError("not a ResumableLoader state: " + ", ".join(problems))
        if state["format"] != FORMAT:
            raise ValueError(f"state format {state['format']!r}, expected {FORMAT!r}")
        if state["length"] != len(self.dataset):
            raise ValueError(f"state for {state['length']} samples, but this dataset has {len(self.dataset)}")
        if state["batch_size"] < 1 or state["epoch"] < 0:
            raise ValueError(f"batch_size {state['batch_size']} and epoch {state['epoch']} must be >= 1 and >= 0")
        samples = state["batches_done"] * state["batch_size"]
        if state["batches_done"] < 0 or samples - state["batch_size"] >= len(self.dataset) and samples > len(self.dataset):
            raise ValueError(f"batches_done {state['batches_done']} of {state['batch_size']} lies outside the epoch "
                             f"of {len(self.dataset)} samples")
        self.epoch, self._pending = state["epoch"], min(samples, len(self.dataset))
