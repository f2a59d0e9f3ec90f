"""Exercise 17's answer: exactly once on top of tf.data service, which promises at most once (DYNAMIC sharding).

Design choices:
- The workers run everything up to the batch: read, decode, crop, batch. After `distribute` comes only `prefetch`,
  so the trainer's CPU per image is what receiving a batch costs.
- Each job is read by a thread of its own (`read_job`) that puts its batches into a small queue; the consumer waits
  on the queue with the deadline, so a silent job costs `batch_timeout_s`, not forever. A thread reading a job that
  fell silent stays blocked inside TensorFlow until the job speaks or the process ends: it is a daemon, and it stops
  at its next batch once told to.
- `ServedEpoch` holds one rank's epoch; each decision (what to ask for, how long to wait, what to keep, when to ask
  again) is a method of its own. The ledger is the set of keys received. A job that ends or falls silent with keys
  missing is abandoned, and a new job is asked for exactly those keys (a new job: a finished job's name would give end
  of input at once).
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
    crops = samples(paths, labels, keys).map(lambda key, label, path: (key, label, load_crop(path)),
                                              num_parallel_calls=tf.data.AUTOTUNE)
    return on_the_trainer(batched(crops, batch_size).apply(new_job(service)), batch_size)


def samples(paths: Sequence[str], labels: Sequence[int], keys: Sequence[int]) -> tf.data.Dataset:
    """(key, label, path) per sample, in the order given."""
    return tf.data.Dataset.from_tensor_slices((tf.constant(list(keys), tf.int64), tf.constant(list(labels), tf.int64),
                                               tf.constant(list(paths), tf.string)))


def load_crop(path: tf.Tensor) -> tf.Tensor:
    """The file's centre crop, in TensorFlow ops alone (a worker runs the graph, not this process's Python)."""
    return decode_center_crop(tf.io.read_file(path))


def batched(dataset: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """Batches of `batch_size`, the last one short."""
    return dataset.batch(batch_size)


def new_job(service: str) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """distribute's transformation: a new job (no job_name) of the service, DYNAMIC sharding."""
    return tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC, service=service)


def on_the_trainer(served: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """What runs on the trainer after the job: only prefetching."""
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


class ServedEpoch:
    """One rank's share read exactly once from the jobs `request` starts: a ledger of the keys received, a new job for
    those still missing after each job, and the samples waiting for the next planned batch. Each decision is a method
    of its own."""

    def __init__(self, request: Callable[[list[int]], Iterable[Any]], keys: list[int], sizes: list[int],
                 timeout_s: float) -> None:
        self.request, self.keys, self.sizes, self.timeout_s = request, keys, sizes, timeout_s
        self.wanted, self.received = set(keys), set()
        self.waiting: list[tuple[int, Any, Any]] = []   # (key, label, image) not yet in a yielded batch
        self.stop = threading.Event()

    def batches(self) -> Iterator[Batch]:
        """The planned batches, as their samples arrive."""
        try:
            while missing := self.still_missing():
                answers = self.start_job(missing)
                delivered = False
                for item in self.items(answers):
                    delivered = True
                    self.take(item)
                    yield from self.ready()
                self.stop.set()
                if not self.ask_again(delivered):
                    break
            yield from self.rest()
        finally:
            self.stop.set()   # also when the caller stops early: the job's reader stops at its next batch

    def still_missing(self) -> list[int]:
        """The keys a new job is asked for: those not received yet, in the plan's order."""
        return [key for key in self.keys if key not in self.received]

    def start_job(self, keys: list[int]) -> queue.Queue:
        """A new job over `keys`, read by a thread of its own into the queue returned."""
        answers: queue.Queue = queue.Queue(maxsize=QUEUE_BATCHES)
        self.stop = threading.Event()
        threading.Thread(target=read_job, args=(lambda: self.request(keys), answers, self.stop), daemon=True,
                         name="ex17-job").start()
        return answers

    def items(self, answers: queue.Queue) -> Iterator[Any]:
        """The job's batches until it ends or sends nothing for the deadline (from its start or its last batch); an
        error it raised, raised here."""
        while True:
            try:
                item = answers.get(timeout=self.timeout_s)
            except queue.Empty:
                return            # silent for the whole deadline: a lost worker
            if isinstance(item, JobEnded):
                return
            if isinstance(item, Exception):
                raise item
            yield item

    def take(self, batch: Any) -> None:
        """Add a job's batch to the ledger: a key received already is dropped, a key not asked for is an error."""
        batch_keys, batch_labels, batch_images = batch
        for row, key in enumerate(np.asarray(batch_keys).tolist()):
            if key not in self.wanted:
                raise ValueError(f"the service sent key {key}, which was not asked for")
            if key in self.received:
                continue   # sent again (a worker's shard started again): dropped
            self.received.add(key)
            self.waiting.append((key, np.asarray(batch_labels[row]), np.asarray(batch_images[row])))

    def ready(self) -> Iterator[Batch]:
        """Every planned batch whose samples are all waiting."""
        while self.sizes and len(self.waiting) >= self.sizes[0]:
            yield cut(self.waiting, self.sizes.pop(0))

    def ask_again(self, delivered: bool) -> bool:
        """After a job: go on asking for what is missing (True). A job that delivered nothing means no service."""
        if not delivered and len(self.received) < len(self.wanted):
            raise TimeoutError(f"{len(self.wanted) - len(self.received)} keys missing: a new job delivered nothing "
                               f"within {self.timeout_s:g} s (is the service running, and does it have workers?)")
        return True

    def rest(self) -> Iterator[Batch]:
        """The planned batches still to yield once the jobs are over."""
        while self.sizes and self.waiting:
            yield cut(self.waiting, min(self.sizes.pop(0), len(self.waiting)))


def exactly_once(request: Callable[[list[int]], Iterable[Any]], keys: Sequence[int], sizes: Sequence[int],
                 batch_timeout_s: float | None = None) -> Iterator[Batch]:
    """The batches of `keys`, of `sizes`, each key exactly once, read from jobs that `request` starts."""
    timeout_s = BATCH_TIMEOUT_S if batch_timeout_s is None else batch_timeout_s
    keys, sizes = [int(key) for key in keys], [int(size) for size in sizes]
    check_arguments(keys, sizes, timeout_s)
    return ServedEpoch(request, keys, sizes, timeout_s).batches()


def cut(waiting: list[tuple[int, Any, Any]], size: int) -> Batch:
    """The first `size` waiting samples as one batch (removed from `waiting`)."""
    taken, waiting[:size] = waiting[:size], []
    return (np.asarray([key for key, _, _ in taken], dtype=np.int64), np.stack([label for _, label, _ in taken]),
            np.stack([image for _, _, image in taken]))
