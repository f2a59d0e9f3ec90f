"""Exercise 03, reference solution: a process-based loader with shared-memory hand-over.

Design choices (the docstring of `ProcessLoader` says why):
- one Pipe per worker, batches dealt round-robin (batch b -> worker b % num_workers),
  so order is free and a dead worker is known exactly;
- a ring of shared-memory slots owned by the parent (batch b -> slot b % slots);
  workers write pixels into a slot and send back only the batch number and labels;
- every wait is `multiprocessing.connection.wait([pipe, process sentinel], timeout)`,
  so a worker that dies wakes the parent at once.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import connection
from multiprocessing.process import BaseProcess
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from loaderlab.images import CROP, Sample, reference_crop

Transform = Callable[[np.ndarray, np.random.Generator], np.ndarray]
IMAGE_SHAPE = (CROP, CROP, 3)
POLL_S = 0.1
JOIN_TIMEOUT_S = 3.0


class WorkerError(RuntimeError):
    """A worker's exception, re-raised in the parent with the worker's type name, message and traceback."""

    def __init__(self, message: str, type_name: str = "", worker_message: str = "", worker_traceback: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name
        self.worker_message = worker_message
        self.worker_traceback = worker_traceback


class WorkerDied(RuntimeError):
    """A worker process ended (killed, crashed, os._exit) while the loader still needed it."""


def random_flip_and_jitter(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A light augmentation: horizontal flip with probability 1/2, then a brightness shift in [-16, 16].

    Picklable (top-level), uint8 in, uint8 (224, 224, 3) out; all randomness comes from `rng`.
    """
    if rng.random() < 0.5:
        image = image[:, ::-1]
    shift = int(rng.integers(-16, 17))
    return np.clip(image.astype(np.int16) + shift, 0, 255).astype(np.uint8)


def slot_array(buffer: memoryview | bytearray, rows: int) -> np.ndarray:
    """The uint8 (rows, 224, 224, 3) array whose memory is `buffer` (a segment's `.buf`): no copy."""
    return np.ndarray((rows, *IMAGE_SHAPE), np.uint8, buffer=buffer)


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator for one sample of one epoch: depends on (seed, epoch, index) only, never on the worker."""
    return np.random.default_rng([seed, epoch, index])


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words: a negative exit code is the signal that killed it."""
    if exitcode is None:
        return "no exit code (still running)"
    if exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name} (exit code {exitcode})"
        except ValueError:
            return f"signal {-exitcode} (exit code {exitcode})"
    return f"exit code {exitcode}"


def stop_processes(processes: Sequence[BaseProcess], timeout_s: float) -> list[int]:
    """Join every process within `timeout_s` in all, then kill and join those still alive; their pids."""
    deadline = time.monotonic() + timeout_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    killed = []
    for process in processes:
        if process.is_alive():
            killed.append(process.pid)
            process.kill()
            process.join(timeout_s)
    return killed


def load_sample(samples: Sequence[Sample], index: int, transform: Transform, seed: int, epoch: int) -> np.ndarray:
    """Decode, crop and transform sample `index`; checks the transform's output."""
    image = transform(reference_crop(samples[index].path), sample_rng(seed, epoch, index))
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.shape != IMAGE_SHAPE:
        raise TypeError(f"the transform must return a uint8 array of shape {IMAGE_SHAPE}, got "
                        f"{getattr(image, 'dtype', type(image))} {getattr(image, 'shape', '')}")
    return image


def _worker(samples: Sequence[Sample], transform: Transform, seed: int, epoch: int, slot_names: list[str],
            batch_size: int, pipe: connection.Connection) -> None:
    """A worker's loop: receive (batch, slot, start, stop), fill the slot, answer; None means stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    slots = [SharedMemory(name=name) for name in slot_names]
    try:
        while True:
            task = pipe.recv()
            if task is None:
                return
            batch, slot, start, stop = task
            index = start
            try:
                view = slot_array(slots[slot].buf, batch_size)
                try:
                    for row, index in enumerate(range(start, stop)):
                        view[row] = load_sample(samples, index, transform, seed, epoch)
                finally:
                    del view  # no view may outlive the mapping
                labels = np.array([samples[i].label for i in range(start, stop)], dtype=np.int64)
                pipe.send(("ok", batch, labels))
            except Exception as err:  # reported to the parent, never swallowed
                pipe.send(("error", batch, type(err).__name__, str(err), str(samples[index].path),
                           traceback.format_exc()))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return  # the parent went away
    finally:
        for shm in slots:
            shm.close()


class ProcessLoader:
    """Batches of `(images uint8 (N, 224, 224, 3), labels int64 (N,))`, made by worker processes.

    `transform(image, rng) -> image`: a picklable (top-level or functools.partial)
    function taking a uint8 (224, 224, 3) reference crop and a numpy Generator,
    returning a uint8 (224, 224, 3) array. Sample i of epoch `epoch` is transformed
    with `np.random.default_rng([seed, epoch, i])`, so augmentations are reproducible
    per sample and epoch, change from one epoch to the next, and do not depend on
    `num_workers` or on which worker loads what.

    Hand-over: the parent owns a ring of `num_workers * prefetch` shared-memory
    slots (fewer if the epoch has fewer batches), one batch each, named by the
    system so that several loaders can live at once. Workers write pixels straight
    into a slot and send back only (batch number, labels); pixels are never pickled.
    The parent copies a batch out of its slot (one memcpy, about 5 MB for 32 images,
    small next to decoding 32 JPEGs) and reuses the slot: the caller may keep
    batches as long as it likes, and since only the parent creates and unlinks
    segments, a worker killed mid-write can leak nothing. Wrapping the slot without
    a copy would save that memcpy but tie the slot's reuse to the caller releasing
    the batch.

    Errors: a worker's exception is raised from `next()` as WorkerError naming its
    type, message and sample, when its batch's turn comes; a worker that dies is
    reported as WorkerDied at once (every wait also watches the process). `timeout_s`
    bounds each wait: next() raises TimeoutError after waiting that long for its
    batch, however long the epoch lasts in all. `close()`, leaving a `with` block,
    an error from next(), and reaching the end stop and join every worker (killing
    any that do not stop within a few seconds) and unlink every segment.

    Variants (tests/planted/ex03_*) replace one piece: the seams are the methods below that have no underscore
    (make_slot, in_flight, submit, send_task, collect, slot_view, wait_for, receive, handle, join_workers,
    release_slot) and the state they share, public as well: `batches` (each batch's (start, stop) sample range,
    in order), `workers` and `pipes` (worker w's process and the parent's end of its pipe), `submitted` (batches
    handed to workers so far) and `timeout_s`.
    """

    worker = staticmethod(_worker)  # what each process runs (a top-level function: spawn pickles it by name)

    def __init__(self, samples: Sequence[Sample], transform: Transform, batch_size: int, num_workers: int,
                 seed: int, timeout_s: float = 60.0, start_method: str | None = None, prefetch: int = 2,
                 *, epoch: int = 0) -> None:
        if batch_size < 1 or num_workers < 1 or prefetch < 1:
            raise ValueError("batch_size, num_workers and prefetch must be at least 1")
        self._samples = list(samples)
        self._batch_size = batch_size
        self.timeout_s = timeout_s
        self.batches = [(start, min(start + batch_size, len(self._samples)))
                        for start in range(0, len(self._samples), batch_size)]
        self._next_batch = 0   # the next batch to hand to the caller
        self.submitted = 0     # batches handed to workers so far
        self._closed = False
        self.workers: list[BaseProcess] = []
        self.pipes: list[connection.Connection] = []
        self._ready: dict[int, Any] = {}  # batch -> what its worker reported (labels), pixels waiting in their slot
        self._slots: list[SharedMemory] = []
        context = multiprocessing.get_context(start_method)
        slot_bytes = batch_size * int(np.prod(IMAGE_SHAPE))
        try:
            for index in range(min(num_workers * prefetch, max(1, len(self.batches)))):
                self._slots.append(self.make_slot(index, slot_bytes))
            for worker_id in range(num_workers):
                parent_end, child_end = context.Pipe(duplex=True)
                process = context.Process(
                    target=self.worker, name=f"ProcessLoader-{worker_id}", daemon=True,
                    args=(self._samples, transform, seed, epoch, [s.name for s in self._slots], batch_size, child_end))
                process.start()
                child_end.close()
                self.workers.append(process)
                self.pipes.append(parent_end)
            self.submit()
        except BaseException:
            self.close()
            raise

    def make_slot(self, index: int, size: int) -> SharedMemory:
        """A new shared-memory segment of `size` bytes for slot `index`, named by the system (unique, so that
        several loaders can live at once)."""
        return SharedMemory(create=True, size=size)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> ProcessLoader:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        if self._closed or self._next_batch >= len(self.batches):
            self.close()
            raise StopIteration
        try:
            images, labels = self.collect(self._next_batch)
            self._next_batch += 1
            self.submit()  # the slot is free again
            return images, labels
        except BaseException:
            self.close()
            raise

    def collect(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """Wait for `batch`, then copy its pixels out of its slot (the slot is reused once next() returns)."""
        labels = self.wait_for(batch)
        start, stop = self.batches[batch]
        view = self.slot_view(batch)
        images = view[: stop - start].copy()
        del view
        return images, labels

    def slot_view(self, batch: int) -> np.ndarray:
        """The uint8 (batch_size, 224, 224, 3) array over the slot of `batch`: no copy."""
        return slot_array(self._slots[batch % len(self._slots)].buf, self._batch_size)

    def in_flight(self) -> int:
        """How many batches may be handed to workers and not yet to the caller: one per slot."""
        return len(self._slots)

    def submit(self) -> None:
        """Hand out batches while a slot is free (batch b uses slot b % slots, worker b % workers)."""
        while self.submitted < len(self.batches) and self.submitted < self._next_batch + self.in_flight():
            self.send_task(self.submitted)
            self.submitted += 1

    def send_task(self, batch: int) -> None:
        """Ask worker `batch % workers` to write `batch` into slot `batch % slots`."""
        start, stop = self.batches[batch]
        try:
            self.pipes[batch % len(self.pipes)].send((batch, batch % len(self._slots), start, stop))
        except OSError:
            pass  # that worker is gone: waiting for this batch will report it

    def wait_for(self, batch: int) -> Any:
        """What the worker reported for `batch` (its labels); raises on a worker error, death or timeout."""
        deadline = time.monotonic() + self.timeout_s
        worker_id = batch % len(self.workers)
        while batch not in self._ready:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no batch from worker {worker_id} (pid {self.workers[worker_id].pid}) for "
                                   f"{self.timeout_s:.0f} s while waiting for batch {batch}")
            message = self.receive(worker_id, batch, min(POLL_S, remaining))
            if message is not None:
                done, result = self.handle(worker_id, message)
                self._ready[done] = result
        return self._ready.pop(batch)

    def receive(self, worker_id: int, batch: int, timeout_s: float) -> tuple[Any, ...] | None:
        """Worker `worker_id`'s next message, or None if none came within `timeout_s`; WorkerDied (naming `batch`)
        as soon as the worker has ended. The wait watches the pipe and the process together."""
        pipe, process = self.pipes[worker_id], self.workers[worker_id]
        if pipe in connection.wait([pipe, process.sentinel], timeout=timeout_s):
            try:
                return pipe.recv()
            except (EOFError, OSError):
                pass
        if not process.is_alive():
            process.join(0)
            raise WorkerDied(f"worker {worker_id} (pid {process.pid}) died with {describe_exit(process.exitcode)} "
                             f"while loading batch {batch} (samples {self.batches[batch][0]} to "
                             f"{self.batches[batch][1] - 1}); its batch is lost, so the epoch stops here.")
        return None

    def handle(self, worker_id: int, message: tuple[Any, ...]) -> tuple[int, Any]:
        """A worker's message: (batch, labels) for a batch written into its slot; WorkerError for a failed one."""
        if message[0] == "ok":
            _, batch, labels = message
            return batch, labels
        _, batch, type_name, text, path, worker_traceback = message
        raise WorkerError(f"worker {worker_id} raised {type_name}: {text} (batch {batch}, sample {path})\n"
                          f"--- worker traceback ---\n{worker_traceback}",
                          type_name, text, worker_traceback)

    def close(self) -> None:
        """Stop and join every worker (killing stragglers), then unlink every segment. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for pipe in self.pipes:
            try:
                pipe.send(None)
            except (OSError, ValueError):
                pass
        self.join_workers()
        for pipe in self.pipes:
            pipe.close()
        for process in self.workers:
            if not process.is_alive():
                process.close()
        for shm in self._slots:
            self.release_slot(shm)
        self._ready.clear()

    def join_workers(self) -> None:
        """Join every worker within JOIN_TIMEOUT_S in all; kill those still alive."""
        stop_processes(self.workers, JOIN_TIMEOUT_S)

    def release_slot(self, shm: SharedMemory) -> None:
        """Close and unlink one segment (only the parent creates and unlinks them: a killed worker leaks nothing)."""
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
        if hasattr(self, "_slots") and hasattr(self, "_closed"):
            self.close()
