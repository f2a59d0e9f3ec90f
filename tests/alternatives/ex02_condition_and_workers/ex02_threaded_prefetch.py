"""Exercise 02, another route: a prefetcher on a Condition and a deque (it pulls an item only when there
is room, so it runs at most `depth` ahead, not depth + 1), and a threaded_map on explicit worker threads
that post results into a dict by index (presence, not a None check, says a result is ready)."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

POLL_S = 0.05
JOIN_TIMEOUT_S = 5.0
ITEM, END, ERROR = object(), object(), object()  # entry kinds: private objects no source can yield
STOP = object()  # tells a worker thread to return at once


class _Channel:
    """What the producer thread and the consumer share: a buffer of (kind, value) entries under one Condition."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.changed = threading.Condition()
        self.entries: deque[tuple[object, object]] = deque()
        self.stopped = False

    def post(self, kind: object, value: object) -> None:
        with self.changed:
            self.entries.append((kind, value))
            self.changed.notify_all()

    def wait_for_room(self) -> bool:
        """Wait until fewer than `depth` entries wait; False once the consumer has stopped."""
        with self.changed:
            while len(self.entries) >= self.depth and not self.stopped:
                self.changed.wait(POLL_S)
            return not self.stopped


def _produce(iterable: Iterable[object], channel: _Channel) -> None:
    """Pull an item only when there is room for it; a plain function, so it holds no prefetcher."""
    try:
        iterator = iter(iterable)
        while channel.wait_for_room():
            try:
                item = next(iterator)
            except StopIteration:
                channel.post(END, None)
                return
            channel.post(ITEM, item)
    except BaseException as err:  # forwarded to the consumer
        channel.post(ERROR, err)


class ThreadedPrefetcher(Generic[T]):
    """Iterate over `iterable` while a background thread keeps up to `depth` items ready."""

    def __init__(self, iterable: Iterable[T], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._channel = _Channel(depth)
        self._done = False
        self._thread = threading.Thread(target=_produce, args=(iterable, self._channel),
                                        name="prefetcher-condition", daemon=True)
        self._thread.start()

    def __iter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        channel = self._channel
        with channel.changed:
            while not channel.entries:
                if not self._thread.is_alive():
                    self._done = True
                    raise RuntimeError("the prefetch thread ended without an end marker")
                channel.changed.wait(POLL_S)
            kind, value = channel.entries.popleft()
            channel.changed.notify_all()
        if kind is ITEM:
            return value  # type: ignore[return-value]
        self.close()
        if kind is ERROR:
            raise value  # type: ignore[misc]
        raise StopIteration

    def close(self) -> None:
        """Stop the thread and wait for it; safe to call more than once."""
        self._done = True
        with self._channel.changed:
            self._channel.stopped = True
            self._channel.entries.clear()
            self._channel.changed.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT_S)

    def __enter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, "_thread"):
            self.close()


class _Results:
    """Results posted by index; a result is ready when its index is present, whatever its value."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.by_index: dict[int, tuple[object, object]] = {}

    def post(self, index: int, kind: object, value: object) -> None:
        with self.changed:
            self.by_index[index] = (kind, value)
            self.changed.notify_all()

    def take(self, index: int, workers: list[threading.Thread]) -> tuple[object, object]:
        with self.changed:
            while index not in self.by_index:
                if not any(worker.is_alive() for worker in workers):
                    raise RuntimeError("threaded_map's worker threads ended before every result was in")
                self.changed.wait(POLL_S)
            return self.by_index.pop(index)


def _work(fn: Callable[[object], object], tasks: queue.Queue, results: _Results, cancelled: threading.Event) -> None:
    while not cancelled.is_set():
        try:
            task = tasks.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if task is STOP:
            return
        index, item = task
        try:
            results.post(index, ITEM, fn(item))
        except BaseException as err:  # raised by the consumer in this item's place
            results.post(index, ERROR, err)


def threaded_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    num_threads: int = 8,
    max_in_flight: int | None = None,
) -> Iterator[R]:
    """Yield `fn(item)` for each item, computed on `num_threads` worker threads, in input order."""
    if num_threads < 1:
        raise ValueError(f"num_threads must be at least 1, got {num_threads}")
    limit = 2 * num_threads if max_in_flight is None else max_in_flight
    if limit < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    tasks: queue.Queue = queue.Queue()  # the window below bounds it
    results = _Results()
    cancelled = threading.Event()
    workers = [threading.Thread(target=_work, args=(fn, tasks, results, cancelled), name=f"threaded_map-{n}", daemon=True)
               for n in range(num_threads)]
    for worker in workers:
        worker.start()
    source = iter(items)
    submitted = yielded = 0
    exhausted = False
    try:
        while True:
            while not exhausted and submitted - yielded < limit:
                try:
                    tasks.put((submitted, next(source)))
                    submitted += 1
                except StopIteration:
                    exhausted = True
            if yielded == submitted:
                return
            kind, value = results.take(yielded, workers)
            yielded += 1
            if kind is ERROR:
                raise value  # type: ignore[misc]
            yield value  # type: ignore[misc]
    finally:
        cancelled.set()  # the tasks still queued are skipped
        for _ in workers:
            tasks.put(STOP)  # wakes an idle worker now rather than at its next poll
        for worker in workers:
            worker.join(JOIN_TIMEOUT_S)
