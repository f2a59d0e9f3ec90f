"""Exercise 03, another right route: a `concurrent.futures.ProcessPoolExecutor` fills shared-memory slots.

The executor deals tasks to whichever worker is idle and reports a dead worker itself, as
`BrokenProcessPool`; a worker's exception comes back with its own type. The loader raises an
error as soon as any batch's future holds one, even a later batch's, and waits with
`concurrent.futures.wait(..., FIRST_COMPLETED)`, so `timeout_s` bounds each wait.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from loaderlab.images import CROP, Sample, reference_crop

Transform = Callable[[np.ndarray, np.random.Generator], np.ndarray]
IMAGE_SHAPE = (CROP, CROP, 3)
STOP_TIMEOUT_S = 3.0

_job: dict[str, Any] = {}  # what every task of this worker process needs, set once by the pool's initializer


def random_flip_and_jitter(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Horizontal flip with probability 1/2, then a brightness shift in [-16, 16]."""
    if rng.random() < 0.5:
        image = image[:, ::-1]
    return np.clip(image.astype(np.int16) + int(rng.integers(-16, 17)), 0, 255).astype(np.uint8)


def _remember(samples: list[Sample], transform: Transform, seed: int, epoch: int) -> None:
    """The pool's initializer: runs once in each worker process, so tasks carry only slot names and indices."""
    _job.update(samples=samples, transform=transform, seed=seed, epoch=epoch)


def _fill_slot(slot_name: str, start: int, stop: int) -> np.ndarray:
    """Decode, crop and transform samples start..stop-1 into the slot; return their labels (the only thing pickled)."""
    samples, transform = _job["samples"], _job["transform"]
    shm = SharedMemory(name=slot_name)
    try:
        view = np.ndarray((stop - start, *IMAGE_SHAPE), np.uint8, buffer=shm.buf)
        try:
            for row, index in enumerate(range(start, stop)):
                rng = np.random.default_rng([_job["seed"], _job["epoch"], index])
                view[row] = transform(reference_crop(samples[index].path), rng)
        finally:
            del view
    finally:
        shm.close()
    return np.array([samples[i].label for i in range(start, stop)], dtype=np.int64)


class ProcessLoader:
    """Batches of `(images uint8 (N, 224, 224, 3), labels int64 (N,))` from a process pool.

    The parent creates `num_workers * prefetch` slots (fewer for a short epoch) with
    system-chosen names and unlinks them in close(); a batch is copied out of its slot
    before the slot is handed to another task. Errors: whatever a future raises
    (the worker's own exception, or BrokenProcessPool when a worker died) is raised
    from next() as soon as it is seen; `timeout_s` bounds each wait for any batch.
    """

    def __init__(self, samples: Sequence[Sample], transform: Transform, batch_size: int, num_workers: int,
                 seed: int, timeout_s: float = 60.0, start_method: str | None = None, prefetch: int = 2,
                 *, epoch: int = 0) -> None:
        if batch_size < 1 or num_workers < 1 or prefetch < 1:
            raise ValueError("batch_size, num_workers and prefetch must be at least 1")
        samples = list(samples)
        self._timeout_s = timeout_s
        self._batches = [(start, min(start + batch_size, len(samples))) for start in range(0, len(samples), batch_size)]
        self._closed = False
        self._slots: list[SharedMemory] = []
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[int, Future] = {}   # batch -> its future, while in flight
        self._slot_of: dict[int, int] = {}      # batch -> its slot, while in flight
        self._next = self._submitted = 0
        try:
            for _ in range(min(num_workers * prefetch, max(1, len(self._batches)))):
                self._slots.append(SharedMemory(create=True, size=batch_size * int(np.prod(IMAGE_SHAPE))))
            self._free = deque(range(len(self._slots)))
            self._pool = ProcessPoolExecutor(num_workers, mp_context=multiprocessing.get_context(start_method),
                                             initializer=_remember, initargs=(samples, transform, seed, epoch))
            self._submit()
        except BaseException:
            self.close()
            raise

    def _submit(self) -> None:
        while self._submitted < len(self._batches) and self._free:
            batch, slot = self._submitted, self._free.popleft()
            start, stop = self._batches[batch]
            self._futures[batch] = self._pool.submit(_fill_slot, self._slots[slot].name, start, stop)
            self._slot_of[batch] = slot
            self._submitted += 1

    def __iter__(self) -> ProcessLoader:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        if self._closed or self._next >= len(self._batches):
            self.close()
            raise StopIteration
        try:
            batch = self._next
            future = self._futures[batch]
            while not future.done():
                done, _ = wait([f for f in self._futures.values() if not f.done()], timeout=self._timeout_s,
                               return_when=FIRST_COMPLETED)
                if not done:
                    raise TimeoutError(f"no batch finished within timeout_s={self._timeout_s:g} s "
                                       f"while waiting for batch {batch}")
                for finished in done:
                    if finished.exception() is not None:
                        raise finished.exception()
            labels = future.result()
            start, stop = self._batches[batch]
            slot = self._slot_of.pop(batch)
            del self._futures[batch]
            view = np.ndarray((stop - start, *IMAGE_SHAPE), np.uint8, buffer=self._slots[slot].buf)
            images = view.copy()
            del view
            self._free.append(slot)
            self._next += 1
            self._submit()
            return images, labels
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop the pool (killing workers still busy after a few seconds) and unlink every slot. Safe twice."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            busy = any(not f.done() for f in self._futures.values())
            if not busy:
                self._pool.shutdown(wait=True)
            else:
                # The executor has no public way to stop a running task before 3.14 (kill_workers()):
                # its _processes are the only handle on the workers.
                processes = list((self._pool._processes or {}).values())
                self._pool.shutdown(wait=False, cancel_futures=True)
                deadline = time.monotonic() + STOP_TIMEOUT_S
                for process in processes:
                    process.join(max(0.0, deadline - time.monotonic()))
                for process in processes:
                    if process.is_alive():
                        process.kill()
                        process.join(STOP_TIMEOUT_S)
        self._futures.clear()
        for shm in self._slots:
            shm.close()
            try:
                shm.unlink()
            except FileNotFoundError:
                pass

    def __enter__(self) -> ProcessLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, "_closed") and hasattr(self, "_slots"):
            self.close()
