"""What notebook 09's section on resuming mid-epoch measures: a dataset that counts its reads, a sampler that counts
what it hands out, and the two ways to resume an epoch (fast-forward, or start the sampler at the offset).

Top-level and picklable, so `DataLoader` workers can receive them under fork and spawn. The epoch order is a function
of (seed, epoch) alone, as exercise 13 asks: a resumed run draws the same order without any saved RNG state.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

LOADER_TIMEOUT_S = 60  # a DataLoader worker that sends nothing for this long is an error, not a hang


class CountingReads(Dataset):
    """Item i is the int i, after an emulated storage read of `read_ms` (a sleep, as `loaderlab.sim` emulates latency).

    `reads` counts every `__getitem__` across the main process and its `DataLoader` workers (a shared counter that
    workers inherit), so a resume that reads skipped samples shows in the count.
    """

    def __init__(self, size: int, read_ms: float = 0.0) -> None:
        self.size = size
        self.read_s = read_ms / 1000
        self._reads = multiprocessing.Value("i", 0)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        if self.read_s:
            time.sleep(self.read_s)
        with self._reads.get_lock():
            self._reads.value += 1
        return int(index)

    @property
    def reads(self) -> int:
        return self._reads.value

    def reset_reads(self) -> None:
        with self._reads.get_lock():
            self._reads.value = 0


class CountingSampler(Sampler[int]):
    """Yields `indices` in order and counts how many it has handed out (`handed_out`) in this iteration.

    A `DataLoader` iterates its sampler in the main process, so the count is read there without any sharing.
    """

    def __init__(self, indices: Sequence[int]) -> None:
        self.indices = list(indices)
        self.handed_out = 0

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[int]:
        self.handed_out = 0
        for index in self.indices:
            self.handed_out += 1
            yield index


def epoch_order(size: int, seed: int, epoch: int) -> list[int]:
    """The epoch's shuffled order, from (seed, epoch) alone: a fresh generator, never one advanced by earlier use."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(size, generator=generator).tolist()


def sampler_lead(dataset: Dataset, batch_size: int, num_workers: int) -> list[tuple[int, int]]:
    """One epoch of a plain `DataLoader` over a `CountingSampler`: after each batch the loop receives,
    (samples received so far, indices the sampler had handed out by then)."""
    sampler = CountingSampler(range(len(dataset)))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers,
                        timeout=LOADER_TIMEOUT_S if num_workers else 0)
    received, rows = 0, []
    for batch in loader:
        received += len(batch)
        rows.append((received, sampler.handed_out))
    return rows


def resume(dataset: CountingReads, batch_size: int, seed: int, epoch: int, received: int,
           fast_forward: bool) -> dict[str, Any]:
    """The rest of the epoch after `received` samples, in the main process: its batches, the reads, the seconds.

    `fast_forward=True` iterates the epoch from its start and throws away the batches already trained on (what a
    loader that saved only a batch count does); `False` starts the sampler at the offset, so nothing before it is read.
    """
    if received % batch_size:
        raise ValueError(f"received={received} is not a whole number of batches of {batch_size}")
    order = epoch_order(len(dataset), seed, epoch)
    dataset.reset_reads()
    start = time.perf_counter()
    indices: Iterable[int] = order if fast_forward else order[received:]
    batches = [batch.tolist() for batch in DataLoader(dataset, batch_size=batch_size, sampler=list(indices))]
    if fast_forward:
        batches = batches[received // batch_size:]
    return {"batches": batches, "reads": dataset.reads, "seconds": time.perf_counter() - start}


class AugmentationDraws(Dataset):
    """Item i: the tensor [i, the random draw its augmentation would make], drawn one of two ways.

    `by="worker"`: from the worker's torch generator, as a random transform in `__getitem__` draws (the DataLoader
    seeds each worker with its base seed + the worker's id); `by="index"`: from a generator seeded with
    (seed, epoch, i) alone, which no worker, offset or restart changes."""

    def __init__(self, size: int, by: str, seed: int = 0) -> None:
        if by not in ("worker", "index"):
            raise ValueError(f"by must be 'worker' or 'index', got {by!r}")
        self.size, self.by, self.seed, self.epoch = size, by, seed, 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.by == "worker":
            draw = torch.randint(0, 2**31 - 1, ())
        else:
            generator = torch.Generator().manual_seed((self.seed * 1_000_003 + self.epoch) * 1_000_003 + index)
            draw = torch.randint(0, 2**31 - 1, (), generator=generator)
        return torch.stack([torch.tensor(index), draw])


def augmentation_after_resume(size: int, batch_size: int, workers: int, seed: int, epoch: int, received: int,
                              by: str) -> dict[str, Any]:
    """The draws of epoch `epoch`'s samples after the first `received`, in an uninterrupted job and in a job
    restarted from a checkpoint there, both starting with `torch.manual_seed(seed)` and loading each epoch with a new
    `DataLoader` (as exercise 13's solution does). Every DataLoader iterator takes its workers' base seed from the
    global generator, so the uninterrupted job has drawn one for each earlier epoch and the restarted one has not.
    Returns {"compared": samples, "differ": samples whose draw differs}."""
    dataset = AugmentationDraws(size, by, seed)
    dataset.epoch = epoch
    order = epoch_order(size, seed, epoch)

    def draws(indices: list[int], earlier_epochs: int) -> dict[int, int]:
        torch.manual_seed(seed)
        for _ in range(earlier_epochs):  # each earlier epoch's loader drew its base seed (its batches change nothing)
            iter(DataLoader(dataset, batch_size=batch_size, sampler=[]))
        loader = DataLoader(dataset, batch_size=batch_size, sampler=indices, num_workers=workers,
                            timeout=LOADER_TIMEOUT_S if workers else 0)
        return {int(i): int(d) for batch in loader for i, d in batch.tolist()}

    uninterrupted = draws(order, epoch)
    resumed = draws(order[received:], 0)
    rest = order[received:]
    return {"compared": len(rest), "differ": sum(uninterrupted[i] != resumed[i] for i in rest)}


def flatten(state: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every leaf of a nested state dict, by its dotted path (to print what a loader's checkpoint holds)."""
    leaves: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, dict) and value:
            leaves.update(flatten(value, f"{prefix}{key}."))
        else:
            leaves[f"{prefix}{key}"] = value
    return leaves


def describe(value: Any) -> str:
    """A short description of one state leaf: a tensor by dtype and size, anything else by its repr."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"tensor of {value.numel()} {dtype} ({value.numel() * value.element_size()} bytes)"
    return repr(value)
