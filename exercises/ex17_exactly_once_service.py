"""Exercise 17: exactly once, on top of a service that promises less.

Notebook 11b moved the decoding off the trainer: tf.data service's workers read, decode and crop, and the trainer
only receives batches. The price is in the guarantees. With `ShardingPolicy.DYNAMIC` the service promises each sample
AT MOST once: a worker killed mid-epoch takes the batches it had in hand with it (the notebook counted them: a few
samples never arrive, and the iterator says nothing). A worker killed and not started again can leave the trainer
waiting forever. And a static policy sends a restarted worker's whole shard again. A trainer that must see every
sample of its share exactly once has to build that itself: keep a ledger of the keys it has, ask a NEW job for the
keys still missing, drop what arrives twice, and give up on a job that has gone silent.

Build it in steps; each TODO names its step, and `pytest grader/test_ex17_exactly_once_service.py` shows each step's
status:
  1 decode elsewhere (TODO(ex17, step 1))      2 split to ranks (TODO(ex17, step 2))
  3 exactly once (TODO(ex17, step 3))          4 on the real service (needs steps 1-3; Linux only, in the course's
                                                 sandbox: skipped elsewhere, with the reason)
  5 bad input (TODO(ex17, step 5))
Hints: `make hint EX=ex17` (LEVEL=1 to 5, from a nudge to nearly the answer).

How the course runs it (step 4): a trainer process with `world_size` ranks, each a thread, in the course's sandbox
(its servers listen on loopback alone there) beside a dispatcher and two workers. Each rank calls
`keys, sizes = rank_plan(num_samples, rank, world_size, batch_size)`, then iterates
`exactly_once(request, keys, sizes)`, where `request(wanted)` returns
`request_epoch(service, paths, labels, wanted, batch_size)` for the files and labels of those keys. The grader kills a
worker mid-epoch, starts it again or not, and reads what every rank received.

Contract (the grader checks each point; [n] is the step that checks it):
- [1] `request_epoch` returns a dataset that registers a NEW job with the service at `service` on every call (two
  calls never share a job: no `job_name`, or a new one each call) under `ShardingPolicy.DYNAMIC`, applied with
  `tf.data.experimental.service.distribute` (call it through that name while `request_epoch` runs: the grader
  replaces it there to run your dataset without a service and records the call);
- [1] what the workers run reads each file, decodes and crops it with the course's
  `loaderlab.tfdata.decode_center_crop`, and batches: each element is (keys int64 (n,), labels int64 (n,), images
  uint8 (n, 224, 224, 3)), the samples in the order given, `batch_size` per batch, the last one short; the pixels
  within the course's tolerance of the reference crop (`loaderlab.images`: a mean of at most 2.0 levels, no image
  above 6.0), for every kind of file the dataset holds (progressive, CMYK, grayscale, a PNG named .jpg, ...); the
  images leave the workers decoded (the trainer receives crops, it never decodes);
- [2] `rank_plan` gives rank `rank` the keys rank, rank + world_size, rank + 2 * world_size, ... below
  `num_samples` (so every key is on one rank, once), and its batch sizes: every rank the same number of batches,
  ceil(ceil(num_samples / world_size) / batch_size), none empty and none above `batch_size`, the rank's keys spread
  over them as evenly as possible, the larger batches first (a rank with one batch fewer than the others would
  leave them waiting in their next collective; with `batch_size` 1 and an uneven split, no plan can have both);
- [3] `exactly_once` yields batches (keys, labels, images) as numpy arrays, of the sizes `sizes` in that order, each
  row's label and image the ones that arrived with its key, every key of `keys` exactly once, in arrival order; a
  batch is yielded as soon as its samples have arrived (not after the whole epoch);
- [3] it reads a job (`request(keys)`, any iterable of such batches, in any sizes) and keeps a ledger of the keys
  received: a key that arrives again is dropped; when the job ends with keys still missing, or sends nothing for
  `batch_timeout_s` (a worker lost for good), it abandons that job and calls `request` again with exactly the keys
  still missing, until every key has arrived; it never abandons a job sooner than `batch_timeout_s` after that job's
  last batch (or its start), and does so within 1 s after;
- [3] closing the iterator early (a `break` in the training loop) stops the job it was reading: no thread of yours
  keeps pulling batches from it;
- [5] bad input raises, without waiting longer than it must: ValueError for `rank_plan` with `world_size` < 1, a rank
  outside 0..world_size - 1, `batch_size` < 1, fewer samples than ranks, or a rank that would get fewer keys than
  the batch count (`batch_size` 1 and `num_samples` not a multiple of `world_size`); for `exactly_once` with a key
  twice in `keys`, `sizes` that do not add up to the number of keys (or hold a size below 1), or `batch_timeout_s`
  <= 0;
  for `request_epoch` with `paths`, `labels` and `keys` of different lengths or `batch_size` < 1. A job that
  delivers nothing at all within `batch_timeout_s` of being requested (no service at the address, every worker
  gone) makes `exactly_once` raise TimeoutError naming how many keys are missing and the deadline; an exception
  raised while reading a job (a file that does not decode, a file that is gone) comes out of `exactly_once` with
  its message, and is not retried; a job that sends a key that was not asked for makes it raise ValueError naming
  the key;
- [4] in the course's trainer, on the real service, two ranks each receive every key of their plan exactly once in
  batches of their plan's sizes, with the right labels and pixels: with no fault, the trainer's CPU time per image
  at most 0.5 of what decoding the same images costs it; with a worker SIGKILLed mid-epoch and started again; with
  a worker SIGKILLed and not started again (its jobs fall silent: your deadline, then a new job on the worker left).

BATCH_TIMEOUT_S is a number of seconds from 3 s to 30 s (checked): long enough for a new job's first batch on a busy
machine (1-3 s were measured on 2 cores), short enough that a lost worker costs seconds, not the epoch.
"""

from __future__ import annotations

import queue  # noqa: F401  (you will need these)
import threading  # noqa: F401
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from loaderlab.tfdata import decode_center_crop  # noqa: F401

# TODO(ex17, step 3): how long a job may send nothing before you give it up, in seconds (from 3 to 30).
BATCH_TIMEOUT_S: float = 0.0

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]   # keys, labels, images


def request_epoch(service: str, paths: Sequence[str], labels: Sequence[int], keys: Sequence[int],
                  batch_size: int) -> tf.data.Dataset:
    """A new job of the service at `service` ("grpc://host:port") over these samples: sample i is (keys[i],
    labels[i], the file paths[i]), decoded and cropped in the service's workers."""
    # TODO(ex17, steps 1, 5): the dataset the workers run (read, decode and crop with decode_center_crop, batch),
    # handed to the service with distribute under DYNAMIC sharding. Ask yourself which side of `distribute` each map
    # runs on: whatever comes after it runs on the trainer, which is what this exercise moves away from. Refuse what
    # cannot make a dataset (step 5).
    raise NotImplementedError("TODO(ex17, steps 1, 5) in exercises/ex17_exactly_once_service.py: request_epoch")


def rank_plan(num_samples: int, rank: int, world_size: int, batch_size: int) -> tuple[list[int], list[int]]:
    """Rank `rank`'s share of an epoch of `num_samples` keys (0 .. num_samples - 1): its keys, and the sizes of the
    batches it yields them in."""
    # TODO(ex17, steps 2, 5): every world_size-th key from `rank`, and as many batches on every rank. Try 17 samples
    # on 2 ranks in batches of 8 by hand: filling each batch to the brim gives one rank one batch more than the other.
    # Refuse a plan that cannot exist (step 5).
    raise NotImplementedError("TODO(ex17, steps 2, 5) in exercises/ex17_exactly_once_service.py: rank_plan")


def exactly_once(request: Callable[[list[int]], Iterable[Any]], keys: Sequence[int], sizes: Sequence[int],
                 batch_timeout_s: float | None = None) -> Iterator[Batch]:
    """The batches of `keys`, of `sizes`, each key exactly once, read from jobs that `request(wanted_keys)` starts,
    whatever those jobs lose or repeat. `batch_timeout_s` None means BATCH_TIMEOUT_S."""
    # TODO(ex17, steps 3, 5): a ledger of the keys received; a job read where a deadline can interrupt the wait (a
    # `for` over a job blocks for as long as the job is silent, and a silent job may never speak again); a new job
    # for whatever is still missing; batches cut to `sizes` as samples arrive. Then the errors of step 5, each said
    # plainly.
    raise NotImplementedError("TODO(ex17, steps 3, 5) in exercises/ex17_exactly_once_service.py: exactly_once")
