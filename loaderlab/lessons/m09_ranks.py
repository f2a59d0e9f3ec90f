"""What notebook 09 runs on real ranks: functions for `loaderlab.distributed.run_ranks`, and the streams they load.

Every `*_on_rank` function takes `(rank, world_size, ...)` as `run_ranks` calls it, runs inside a rank of a real
gloo group, and returns plain values for the notebook to print. They live here, at the top level of a `.py` module,
because a spawn-started rank imports its function by name: one defined in a notebook cell cannot travel.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, get_worker_info

from loaderlab.distributed import HUNG, RAISED, RankResult

LOADER_TIMEOUT_S = 60  # a DataLoader worker that sends nothing for this long is an error, not a hang
# A rank's DataLoader workers: forked from the rank where the platform can fork, as a Linux training job's are by
# default. A rank started by forkserver would otherwise start its workers through a server of its own, each
# importing torch anew (seconds per DataLoader on 2 cores); spawn where there is no fork (Windows).
WORKER_CONTEXT = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def rank_start_method() -> str:
    """How to start ranks from a process that runs threads (a Jupyter kernel; run_ranks' own store server).

    A child forked from a multi-threaded process can inherit a lock that another thread held at that moment and
    wait for it forever. 'forkserver' forks each rank from a single-threaded server process, which this call sets
    to import this module (and torch) once, so ranks still start in milliseconds; 'spawn' where there is no
    forkserver (Windows).
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    multiprocessing.set_forkserver_preload([__name__])  # read when the server starts, once per process
    return "forkserver"


def all_reduce_on_rank(rank: int, world_size: int) -> tuple[int, float]:
    """Sum rank + 1 over the group: (this rank's process id, the sum every rank gets)."""
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    return os.getpid(), float(total)


def sample_loss(index: int) -> float:
    """A per-sample validation loss with no pattern by rank (the same score as exercise 12's checks)."""
    return ((index * 7919) % 101) / 100


def group_mean(values: Sequence[float]) -> float:
    """The mean of every rank's values together, on every rank: one all_reduce of (sum, count)."""
    totals = torch.tensor([float(sum(values)), float(len(values))], dtype=torch.float64)
    dist.all_reduce(totals)
    total, count = totals.tolist()
    return total / count


# ---- section 1: DistributedSampler as torch ships it -------------------------------------------------------

def distributed_sampler_evaluation_on_rank(rank: int, world_size: int, dataset_size: int) -> dict[str, Any]:
    """This rank's evaluation indices three ways, and the group's mean loss over each.

    `DistributedSampler(shuffle=False)` reads the world size and rank from the process group and pads; with
    `drop_last=True` it cuts the tail; `range(rank, dataset_size, world_size)` gives each index to one rank.
    """
    shares = {
        "padded": list(DistributedSampler(range(dataset_size), shuffle=False)),
        "drop_last": list(DistributedSampler(range(dataset_size), shuffle=False, drop_last=True)),
        "exact": list(range(rank, dataset_size, world_size)),
    }
    means = {name: group_mean([sample_loss(i) for i in indices]) for name, indices in shares.items()}
    return {"shares": shares, "means": means}


def epoch_orders_on_rank(rank: int, world_size: int, dataset_size: int, epochs: int) -> dict[str, list[list[int]]]:
    """This rank's order in each epoch from `DistributedSampler(shuffle=True)`, without and with `set_epoch`."""
    orders: dict[str, list[list[int]]] = {"forgot set_epoch": [], "set_epoch(epoch)": []}
    for name, calls_set_epoch in (("forgot set_epoch", False), ("set_epoch(epoch)", True)):
        sampler = DistributedSampler(range(dataset_size), shuffle=True, seed=0)
        for epoch in range(epochs):
            if calls_set_epoch:
                sampler.set_epoch(epoch)
            orders[name].append(list(sampler))
    return orders


# ---- section 2: unequal batch counts ------------------------------------------------------------------------

def train_on_rank(rank: int, world_size: int, dataset_size: int, batch_size: int, even_out: bool,
                  barrier_at_end: bool) -> int:
    """A training loop's data side: an all_reduce after every batch, as DDP's gradient sync does; the steps run.

    The share is `rank::world_size` of range(dataset_size), an evaluation split: ranks differ by one sample when
    world_size does not divide dataset_size, unless `even_out` drops the remainder. `barrier_at_end` waits for every
    rank at the end, as a loop that saves a checkpoint after the epoch does.
    """
    end = dataset_size - dataset_size % world_size if even_out else dataset_size
    steps = 0
    for _batch in DataLoader(range(rank, end, world_size), batch_size=batch_size):
        dist.all_reduce(torch.ones(1))  # the gradients
        steps += 1
    if barrier_at_end:
        dist.barrier()
    return steps


def outcome(result: RankResult) -> str:
    """One line for a notebook: what the rank did and when; a raise by its last line, a hang by where it waited."""
    line = f"rank {result.rank}: {result.status} after {result.seconds:.1f} s"
    if result.ok:
        return f"{line}, returned {result.value!r}"
    if result.status == RAISED:
        last = next((l for l in reversed(result.detail.splitlines()) if l.strip()), "").strip()
        return f"{line}: {last if len(last) <= 160 else last[:157] + '...'}"
    if result.status == HUNG:
        return f"{line}, blocked in: {' <- '.join(blocked_in(result.detail)) or '(no stack on this platform)'}"
    return f"{line}: {result.detail[:160]}"


_THIS_FILE = os.path.basename(__file__)  # read from the module itself: a literal went stale once the module was renamed


def blocked_in(stack: str) -> list[str]:
    """The frames of a hung rank's stack dump that say where it waited: this module's lines and torch's collective."""
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\w+)', stack)
    return [f"{path.rsplit('/', 1)[-1]}:{line} {function}" for path, line, function in frames
            if path.endswith((_THIS_FILE, "distributed_c10d.py"))]


# ---- section 3: shards over ranks x workers -------------------------------------------------------------------

class ShardSlotSamples(IterableDataset):
    """Samples `(shard, position, worker)` of a sharded dataset, as this rank's DataLoader worker reads them.

    `split="shards"`: slot `rank * workers + worker` of `world_size * workers` reads whole shards, `order[slot::slots]`
    (notebook 06's rule). `split="samples"`: every copy reads the shards in the same order, the rank keeps every
    world_size-th sample of the stream (the remainder dropped, so every rank keeps as many), and its workers take
    whole batches in turn (batch i to worker i % workers).
    """

    def __init__(self, shard_sizes: Sequence[int], rank: int, world_size: int, split: str, batch_size: int) -> None:
        if split not in ("shards", "samples"):
            raise ValueError(f"split must be 'shards' or 'samples', got {split!r}")
        self.shard_sizes, self.rank, self.world_size = list(shard_sizes), rank, world_size
        self.split, self.batch_size = split, batch_size

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        if self.split == "shards":
            slots = self.world_size * workers
            for shard in range(self.rank * workers + worker, len(self.shard_sizes), slots):
                yield from ((shard, position, worker) for position in range(self.shard_sizes[shard]))
            return
        stream = [(shard, position) for shard, size in enumerate(self.shard_sizes) for position in range(size)]
        kept = len(stream) - len(stream) % self.world_size
        mine = stream[self.rank:kept:self.world_size]
        for batch, start in enumerate(range(0, len(mine), self.batch_size)):
            if batch % workers == worker:
                yield from ((shard, position, worker) for shard, position in mine[start:start + self.batch_size])


def _allow_more_workers_than_cores() -> None:
    """In this rank's process only: no warning for more DataLoader workers than cores (the lesson is the split)."""
    warnings.filterwarnings("ignore", message="This DataLoader will create")


def load_shards_on_rank(rank: int, world_size: int, shard_sizes: Sequence[int], workers: int, batch_size: int,
                        split: str) -> dict[str, Any]:
    """One epoch of this rank's DataLoader over `ShardSlotSamples`: batches, and per worker its samples and shards."""
    _allow_more_workers_than_cores()
    loader = DataLoader(ShardSlotSamples(shard_sizes, rank, world_size, split, batch_size), batch_size=batch_size,
                        num_workers=workers, timeout=LOADER_TIMEOUT_S if workers else 0,
                        multiprocessing_context=WORKER_CONTEXT if workers else None)
    samples: Counter[int] = Counter()
    shards: dict[int, set[int]] = {worker: set() for worker in range(max(workers, 1))}
    batches = 0
    for shard, _position, worker in loader:
        batches += 1
        for s, w in zip(shard.tolist(), worker.tolist()):
            samples[w] += 1
            shards[w].add(s)
    return {"batches": batches, "samples": {w: samples[w] for w in shards},
            "shards": {w: sorted(found) for w, found in shards.items()}}


# ---- section 4: the same order for any number of workers ------------------------------------------------------

class WorkerStream(IterableDataset):
    """A list of indices for a DataLoader with workers, split among the workers one of two ways.

    `by="batch"`: batch i (of `batch_size`) goes to worker i % workers, so the DataLoader, which takes one batch from
    each worker in turn, gives back the list's order. `by="sample"`: sample i goes to worker i % workers, which
    batches what it got: every index once, but the order depends on the number of workers.
    """

    def __init__(self, indices: Sequence[int], batch_size: int, by: str) -> None:
        if by not in ("batch", "sample"):
            raise ValueError(f"by must be 'batch' or 'sample', got {by!r}")
        self.indices, self.batch_size, self.by = list(indices), batch_size, by

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        if self.by == "sample":
            yield from self.indices[worker::workers]
            return
        for batch, start in enumerate(range(0, len(self.indices), self.batch_size)):
            if batch % workers == worker:
                yield from self.indices[start:start + self.batch_size]


class SamplerStream(IterableDataset):
    """An `IterableDataset` that holds its sampler, as exercise 12's `WorkerSplitStream` does: each pass reads the
    sampler's order and hands whole batches to the workers (`WorkerStream`, by batch).

    `set_epoch(e)` sets the sampler's epoch, in the process that calls it. A DataLoader worker holds a copy of this
    object, made when the worker started: with `persistent_workers=True` the workers live across epochs and keep
    their copy's epoch. `shared_epoch` (a `multiprocessing.Value`) is the fix: `set_epoch` also writes it, and every
    pass, in whatever process, reads it before drawing the order.
    """

    def __init__(self, sampler: DistributedSampler, batch_size: int, shared_epoch: Any = None) -> None:
        self.sampler, self.batch_size, self.shared_epoch = sampler, batch_size, shared_epoch

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)
        if self.shared_epoch is not None:
            self.shared_epoch.value = epoch

    def __iter__(self) -> Iterator[int]:
        if self.shared_epoch is not None:
            self.sampler.set_epoch(self.shared_epoch.value)
        yield from WorkerStream(list(self.sampler), self.batch_size, "batch")


PERSISTENCE = {"fresh workers every epoch": (False, False), "persistent workers": (True, False),
               "persistent workers, epoch in a shared value": (True, True)}


def persistent_epochs_on_rank(rank: int, world_size: int, dataset_size: int, batch_size: int, workers: int,
                              epochs: int, seed: int) -> dict[str, Any]:
    """This rank's epochs through a `SamplerStream` over `DistributedSampler(shuffle=True)`, `set_epoch` called
    before each, with each setting of PERSISTENCE: {"expected": the sampler's orders, setting: orders loaded}."""
    _allow_more_workers_than_cores()
    context = multiprocessing.get_context(WORKER_CONTEXT)

    def sampler() -> DistributedSampler:
        return DistributedSampler(range(dataset_size), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)

    expected = []
    for epoch in range(epochs):
        reference = sampler()
        reference.set_epoch(epoch)
        expected.append(list(reference))
    loaded: dict[str, Any] = {"expected": expected}
    for setting, (persistent, shared) in PERSISTENCE.items():
        stream = SamplerStream(sampler(), batch_size, context.Value("i", 0) if shared else None)
        loader = DataLoader(stream, batch_size=batch_size, num_workers=workers, persistent_workers=persistent,
                            timeout=LOADER_TIMEOUT_S, multiprocessing_context=WORKER_CONTEXT)
        orders = []
        for epoch in range(epochs):
            stream.set_epoch(epoch)
            orders.append([index for batch in loader for index in batch.tolist()])
        loaded[setting] = orders
        del loader  # persistent workers stop with their loader
    return loaded


def load_with_workers_on_rank(rank: int, world_size: int, dataset_size: int, batch_size: int,
                              worker_counts: Sequence[int], seed: int) -> dict[str, Any]:
    """This rank's training share from `DistributedSampler(drop_last=True)`, loaded through `WorkerStream` both ways
    with each number of workers: {"share": indices, "batch"/"sample": {workers: batches}}."""
    _allow_more_workers_than_cores()
    sampler = DistributedSampler(range(dataset_size), shuffle=True, seed=seed, drop_last=True)
    share = list(sampler)
    loaded: dict[str, Any] = {"share": share}
    for by in ("batch", "sample"):
        loaded[by] = {workers: [batch.tolist() for batch in DataLoader(
            WorkerStream(share, batch_size, by), batch_size=batch_size, num_workers=workers,
            timeout=LOADER_TIMEOUT_S if workers else 0, multiprocessing_context=WORKER_CONTEXT if workers else None)]
            for workers in worker_counts}
    return loaded
