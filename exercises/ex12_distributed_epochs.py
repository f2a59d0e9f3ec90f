"""Exercise 12: exact epochs over several ranks.

Data-parallel training runs one process per accelerator (a "rank"), `world_size` of them, each loading
its own share of every epoch. The shares must add up: for evaluation, every sample scored exactly once
(torch's DistributedSampler pads the last round with repeated samples, which a validation metric then
counts twice); for training, every rank the same number of batches (a rank with one batch more waits in
its gradient all_reduce for a partner that has left: the job hangs); a new order every epoch, the same
on every rank without any talking; and the same order whatever number of DataLoader workers a rank uses.

Build it in steps; the grader reports each one:
  1. one epoch split (TODO(ex12, step 1)): DistributedEpochSampler, checked in one process;
  2. real ranks (TODO(ex12, step 2)): exact_mean and the sampler, run on 2 and 3 ranks joined by gloo on
     127.0.0.1 (`loaderlab.distributed.run_ranks`), with a time limit: a rank that waits in a
     collective forever is reported as hung;
  3. workers (TODO(ex12, step 3)): WorkerSplitStream keeps the sampler's order for any number of workers
     (0, 2, 3), and its set_epoch reaches workers that persist across epochs (persistent_workers=True);
  4. bad input: a rank outside [0, world_size), a world_size below 1 or a negative dataset_size is refused
     (graded on what step 1 built).
Grade: `pytest grader/test_ex12_distributed_epochs.py`. Hints: `make hint EX=ex12`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch  # noqa: F401  (you will need these)
import torch.distributed as dist  # noqa: F401
from torch.utils.data import IterableDataset, Sampler, get_worker_info  # noqa: F401

# How training epochs get equal lengths on every rank when dataset_size % world_size != 0, and what the grader
# holds you to: "drop" (each rank yields dataset_size // world_size samples, none twice in an epoch) or "pad"
# (each rank yields ceil(dataset_size / world_size), every sample at least once, the fewest repeats that can
# even the ranks out).
# TODO(ex12, step 1): keep or change this to the policy your sampler follows.
TRAINING_POLICY = "drop"


class DistributedEpochSampler(Sampler[int]):
    """This rank's share of range(dataset_size) for one epoch: pass it as a DataLoader's `sampler=`.

    Contract (the grader checks each point):
    - evaluation (`training=False`): the ranks' shares together hold every index exactly once: no padding,
      no index on two ranks, none missing (shares then differ by at most one sample; the order is free);
    - training (`training=True`): every rank yields the same number of indices, as TRAINING_POLICY says,
      so every rank runs the same number of batches; a new order each epoch, chosen by `set_epoch(epoch)`,
      the same for the same (seed, epoch) on every rank and in every run, another for another seed; under "drop"
      the samples dropped change from epoch to epoch, so that over a few epochs every sample is trained on;
    - `len(sampler)` is the number of indices an iteration yields;
    - a rank outside [0, world_size), a world_size below 1 or a dataset_size below 0 raises ValueError.
    """

    def __init__(self, dataset_size: int, world_size: int, rank: int, training: bool, seed: int = 0) -> None:
        # TODO(ex12, step 1): refuse impossible arguments with ValueError (step 4 grades it), then keep what
        # __iter__ needs; the epoch starts at 0.
        raise NotImplementedError("TODO(ex12, step 1) in exercises/ex12_distributed_epochs.py: "
                                  "DistributedEpochSampler.__init__")

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration follows (every rank calls it with the same value)."""
        # TODO(ex12, step 1): remember the epoch for __iter__.
        raise NotImplementedError("TODO(ex12, step 1) in exercises/ex12_distributed_epochs.py: set_epoch")

    def __iter__(self) -> Iterator[int]:
        # TODO(ex12, step 1): evaluation: this rank's share of range(dataset_size), each index on exactly one
        # rank. Training: one permutation of range(dataset_size) that every rank draws alike from (seed, epoch)
        # alone (ranks do not talk to agree on it), evened out by TRAINING_POLICY, then this rank's share of it.
        raise NotImplementedError("TODO(ex12, step 1) in exercises/ex12_distributed_epochs.py: __iter__")

    def __len__(self) -> int:
        # TODO(ex12, step 1): how many indices __iter__ yields on this rank, without drawing the permutation.
        raise NotImplementedError("TODO(ex12, step 1) in exercises/ex12_distributed_epochs.py: __len__")


def exact_mean(scores: Sequence[float]) -> float:
    """On every rank of an initialised process group: the mean of all ranks' scores together, the same on each rank.

    Each rank passes the scores of the samples its evaluation sampler gave it, in any sequence (a list, a tuple;
    their counts may differ by one, and a rank may have none).
    The result is within 1e-6 of the exact mean: float32 arithmetic is precise enough, half precision is not.
    """
    # TODO(ex12, step 2): combine the ranks' scores with a collective so that each sample weighs the same
    # whatever rank scored it, and every rank gets the result (a mean of the ranks' means weighs them wrongly).
    raise NotImplementedError("TODO(ex12, step 2) in exercises/ex12_distributed_epochs.py: exact_mean")


class WorkerSplitStream(IterableDataset):
    """The sampler's indices, for `DataLoader(stream, batch_size=batch_size, num_workers=any)`, in the sampler's order.

    With workers, a DataLoader asks each worker for its own copy of this stream and hands out their batches
    in turn: worker 0's first batch, worker 1's first, ..., then worker 0's second. Every index must come out
    once, and the batches in the order a loader without workers gives them.

    `stream.set_epoch(epoch)` makes the next pass follow that epoch's order in every process that iterates the
    stream. With `persistent_workers=True` the workers live across epochs and keep the copy of the stream they
    were started with, so what `set_epoch` changes in this process's copy never reaches them by itself.
    """

    def __init__(self, sampler: DistributedEpochSampler, batch_size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size
        # TODO(ex12, step 3): whatever set_epoch needs so that workers started earlier see the new epoch.

    def set_epoch(self, epoch: int) -> None:
        # TODO(ex12, step 3): set the sampler's epoch here, and make it reach workers that already hold their copy.
        raise NotImplementedError("TODO(ex12, step 3) in exercises/ex12_distributed_epochs.py: WorkerSplitStream.set_epoch")

    def __iter__(self) -> Iterator[int]:
        # TODO(ex12, step 3): in worker w of n (get_worker_info(); None in the main process), yield the indices of
        # the sampler's batches that the DataLoader's turn-taking will ask worker w for, and only those.
        raise NotImplementedError("TODO(ex12, step 3) in exercises/ex12_distributed_epochs.py: WorkerSplitStream")
