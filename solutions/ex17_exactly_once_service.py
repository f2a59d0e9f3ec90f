"""Exercise 17's answer: exactly once on top of tf.data service, which promises at most once (DYNAMIC sharding).

Design choices:
- The workers run everything up to the batch: read, decode, crop, batch. After `distribute` comes only `prefetch`,
  so the trainer's CPU per image is what receiving a batch costs.
- Each job is read by a thread of its own (`read_job`) that puts its batches into a small queue; the consumer waits
  on the queue with the deadline, so a silent job costs `batch_timeout_s`, not forever. A thread reading a job that
  fell silent stays blocked inside TensorFlow until the job speaks or the process ends: it is a daemon, and it stops
  at its next batch once told to.
- The ledger is the set of keys received. A job that ends or falls silent with keys missing is abandoned, and a new
  job is asked for exactly those keys (a new job: a finished job's name would give end of input at once).
- Samples wait in a buffer until the next planned batch is full, so the batch sizes are the plan's whatever the
  jobs' own batches were.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from loaderlab.tfdata import decode_center_crop

# Long enough for a new job's first batch on a busy machine (1-3 s measured on 2 cores), short enough that a lost
# worker costs seconds.
BATCH_TIMEOUT_S: float = 8.0

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]
QUEUE_BATCHES = 4   # how far a job's reader may run ahead of the consumer


def request_epoch(service: str, paths: Sequence[str], labels: Sequence[int], keys: Sequence[int],
                  batch_size: int) -> tf.data.Dataset:
    """A new job of the service over these samples, read, decoded, cropped and batched in its workers."""
    if not len(paths) == len(labels) == len(keys):
        raise ValueError(f"paths, labels and keys must have one entry per sample: got {len(paths)} paths, "
                         f"{len(labels)} labels and {len(keys)} keys")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    files = tf.constant(list(paths), tf.string)
    classes = tf.constant(list(labels), tf.int64)
    names = tf.constant(list(keys), tf.int64)

    def load(i: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        return tf.gather(names, i), tf.gather(classes, i), decode_center_crop(tf.io.read_file(tf.gather(files, i)))

    work = tf.data.Dataset.range(len(paths)).map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
    served = work.apply(tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC, service=service))
    return served.prefetch(2)


def rank_plan(num_samples: int, rank: int, world_size: int, batch_size: int) -> tuple[list[int], list[int]]:
    """Every world_size-th key from `rank`, and as many batches on every rank, ceil(ceil(num_samples / world_size) /
    batch_size), the rank's keys spread over them, the larger first."""
    if world_size < 1 or not 0 <= rank < world_size or batch_size < 1 or num_samples < world_size:
        raise ValueError(f"no plan for {num_samples} samples, rank {rank} of {world_size}, batches of {batch_size}: "
                         "it needs world_size >= 1, 0 <= rank < world_size, batch_size >= 1 and a sample per rank")
    keys = list(range(rank, num_samples, world_size))
    count = -(-(-(-num_samples // world_size)) // batch_size)
    if count > num_samples // world_size:
        raise ValueError(f"{num_samples} samples on {world_size} ranks in batches of {batch_size}: a rank would hold "
                         f"{num_samples // world_size} keys for the {count} batches every rank must have (none empty)")
    base, extra = divmod(len(keys), count)
    return keys, [base + (i < extra) for i in range(count)]


class JobEnded:
    """A job's last item in its queue: it ended."""


def read_job(job: Callable[[], Iterable[Any]], into: queue.Queue, stop: threading.Event) -> None:
    """Put every batch of `job()` into `into`, then a JobEnded (or the exception that ended it); stop at the next batch
    once `stop` is set."""
    try:
        for batch in job():   # a TensorFlow job contacts the dispatcher here: that wait is under the deadline too
            while not stop.is_set():
                try:
                    into.put(batch, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return
        into.put(JobEnded())
    except Exception as error:   # raised on the consumer's side
        into.put(error)


def check_arguments(keys: Sequence[int], sizes: Sequence[int], batch_timeout_s: float) -> None:
    """ValueError for keys given twice, sizes that do not cover the keys, or a deadline that is not positive."""
    if len(set(keys)) != len(keys):
        twice = sorted({key for key in keys if list(keys).count(key) > 1})
        raise ValueError(f"keys must be different from each other: {twice[:5]} appear more than once")
    if any(size < 1 for size in sizes) or sum(sizes) != len(keys):
        raise ValueError(f"sizes must be at least 1 each and add up to the {len(keys)} keys: got {list(sizes)[:8]} "
                         f"(sum {sum(sizes)})")
    if not batch_timeout_s > 0:
        raise ValueError(f"batch_timeout_s must be above 0, got {batch_timeout_s}")


def exactly_once(request: Callable[[list[int]], Iterable[Any]], keys: Sequence[int], sizes: Sequence[int],
                 batch_timeout_s: float | None = None) -> Iterator[Batch]:
    """The batches of `keys`, of `sizes`, each key exactly once, read from jobs that `request` starts."""
    timeout_s = BATCH_TIMEOUT_S if batch_timeout_s is None else batch_timeout_s
    keys, sizes = [int(key) for key in keys], [int(size) for size in sizes]
    check_arguments(keys, sizes, timeout_s)
    wanted, received = set(keys), set()
    waiting: list[tuple[int, Any, Any]] = []   # (key, label, image) not yet in a yielded batch
    stop = threading.Event()
    try:
        while len(received) < len(wanted):
            missing = still_missing(keys, received)
            answers: queue.Queue = queue.Queue(maxsize=QUEUE_BATCHES)
            stop = threading.Event()
            threading.Thread(target=read_job, args=(lambda wanted=missing: request(wanted), answers, stop), daemon=True,
                             name="ex17-job").start()
            delivered = False
            while True:
                try:
                    item = answers.get(timeout=timeout_s)
                except queue.Empty:
                    break     # silent for the whole deadline: a lost worker
                if isinstance(item, JobEnded):
                    break
                if isinstance(item, Exception):
                    raise item
                delivered = True
                batch_keys, batch_labels, batch_images = item
                batch_keys = np.asarray(batch_keys).tolist()
                for row, key in enumerate(batch_keys):
                    if key not in wanted:
                        raise ValueError(f"the service sent key {key}, which was not asked for")
                    if key in received:
                        continue   # sent again (a worker's shard started again): dropped
                    received.add(key)
                    waiting.append((key, np.asarray(batch_labels[row]), np.asarray(batch_images[row])))
                while sizes and len(waiting) >= sizes[0]:
                    yield cut(waiting, sizes.pop(0))
            stop.set()
            if not delivered and len(received) < len(wanted):
                raise TimeoutError(f"{len(wanted) - len(received)} keys missing: a new job delivered nothing within "
                                   f"{timeout_s:g} s (is the service running, and does it have workers?)")
        while sizes:
            yield cut(waiting, sizes.pop(0))
    finally:
        stop.set()


def still_missing(keys: list[int], received: set[int]) -> list[int]:
    """The keys a new job is asked for: those not received yet, in the plan's order."""
    return [key for key in keys if key not in received]


def cut(waiting: list[tuple[int, Any, Any]], size: int) -> Batch:
    """The first `size` waiting samples as one batch (removed from `waiting`)."""
    taken, waiting[:size] = waiting[:size], []
    return (np.asarray([key for key, _, _ in taken], dtype=np.int64), np.stack([label for _, label, _ in taken]),
            np.stack([image for _, _, image in taken]))
