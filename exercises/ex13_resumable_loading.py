"""Exercise 13: resumable loading.

A long run gets killed: a preempted spot instance, a job past its time limit, an out-of-memory kill. It resumes
from its last checkpoint, and the model's weights are only half of that checkpoint: the loader must continue
the epoch at exactly the sample where the killed run stopped, in the same order, so that no sample is trained
on twice and none is skipped. And it must get there without reading the epoch's first part again.

Build `ResumableLoader` in steps; the grader reports each one:
  1. one process (TODO(ex13, step 1)): the epoch's order, iteration that counts what the loop received,
     state_dict / load_state_dict, checked in one process, with 2 workers for the count;
  2. killed and resumed: a real training process saves a checkpoint after every batch, is killed with SIGKILL
     mid-epoch, and a loader with another worker count finishes that epoch and runs the next (graded on what
     step 1 built);
  3. no replay (TODO(ex13, step 3)): resuming reads only the samples that remain;
  4. bad input (TODO(ex13, step 4)): a state that does not fit is refused with ValueError;
  5. speed: resuming at 3/4 of an epoch at least 3x as fast as iterating there and throwing the batches away.
Grade: `pytest grader/test_ex13_resumable_loading.py`. Hints: `make hint EX=ex13`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import torch  # noqa: F401  (you will need these)
from torch.utils.data import DataLoader  # noqa: F401


class ResumableLoader:
    """Batches of a map-style `dataset` in an order drawn from (seed, epoch) alone, through a torch DataLoader
    with `num_workers` workers, that can be saved mid-epoch and resumed exactly.

    Contract (the grader checks each point):
    - an epoch's order is a permutation of range(len(dataset)) drawn from a generator seeded with the seed and
      the epoch, and from nothing else; every sample once per epoch; batches of `batch_size` with the default
      collate, the last one short and kept; `len(loader)` is the number of batches per epoch;
    - `set_epoch(e)` chooses the epoch (0 at first); with the epoch of a state just loaded it keeps the loaded
      position, with another epoch it drops it and the next iteration starts that epoch at its first batch;
    - `state_dict()` returns a NEW dict of plain data (str keys; int or str values: it goes through json.dumps
      and json.loads into a checkpoint file) that counts the samples THE TRAINING LOOP HAS RECEIVED in the
      current epoch, and holds the epoch (and what else you need to check a state, e.g. the dataset's length);
    - after `load_state_dict(state)`, the next `iter()` gives the rest of the saved epoch: the uninterrupted
      epoch's batches from the first sample the loop had not received, nothing if it had received them all;
      any other `iter()` starts the current epoch from its first batch;
    - resuming never reads the samples before the saved position (no fast-forward);
    - the number of workers may differ on resume, and so may the batch size: the rest starts at the same sample
      and is batched with the new size;
    - `load_state_dict` raises ValueError, saying what does not match, for a state saved over a dataset of
      another length, a state missing a key or holding a value of the wrong type, a negative position and a
      position past the end of the epoch, before changing anything: a refused state leaves the loader as it was.
    """

    def __init__(self, dataset: Sized, batch_size: int, seed: int = 0, num_workers: int = 0) -> None:
        # TODO(ex13, step 1): keep the arguments; the epoch starts at 0, with nothing received and nothing loaded.
        raise NotImplementedError("TODO(ex13, step 1) in exercises/ex13_resumable_loading.py: ResumableLoader.__init__")

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration follows (a training loop calls it at the top of every epoch)."""
        # TODO(ex13, step 1): remember the epoch; forget a loaded position unless it is that position's epoch.
        raise NotImplementedError("TODO(ex13, step 1) in exercises/ex13_resumable_loading.py: set_epoch")

    def __iter__(self) -> Iterator[Any]:
        # TODO(ex13, steps 1, 3): this epoch's batches, through a DataLoader with num_workers workers, from where
        # this iteration starts (the loaded position, else the epoch's start) to the end, without reading the samples
        # before it: a resume that reads them again costs what it saves. Keep count of what the training loop has
        # received as it goes: that, and nothing the DataLoader knows, is what a checkpoint must record.
        raise NotImplementedError("TODO(ex13, step 1) in exercises/ex13_resumable_loading.py: __iter__")

    def __len__(self) -> int:
        # TODO(ex13, step 1): batches per epoch, the short last one included.
        raise NotImplementedError("TODO(ex13, step 1) in exercises/ex13_resumable_loading.py: __len__")

    def state_dict(self) -> dict[str, Any]:
        # TODO(ex13, step 1): a new dict of plain data: the epoch, how many samples the loop has received in it, and
        # what load_state_dict needs to tell a state that does not fit this loader.
        raise NotImplementedError("TODO(ex13, step 1) in exercises/ex13_resumable_loading.py: state_dict")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # TODO(ex13, step 1): restore the epoch and the position the next iter() starts from.
        # TODO(ex13, step 4): first refuse, with ValueError saying what does not match, a state that does not fit.
        raise NotImplementedError("TODO(ex13, step 1) in exercises/ex13_resumable_loading.py: load_state_dict")
