"""Planted: every sample that arrives is passed on: a restarted worker's repeats reach the trainer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from solutions.ex17_exactly_once_service import *  # noqa: F401,F403
from solutions.ex17_exactly_once_service import (BATCH_TIMEOUT_S, QUEUE_BATCHES, Batch, JobEnded, check_arguments,
                                                 cut, read_job, still_missing)


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
