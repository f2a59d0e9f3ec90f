"""Planted defect: the queue holds depth - 1 items to count the one in hand, so depth=1 makes Queue(maxsize=0): no bound at all."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

POLL_S = 0.05
JOIN_TIMEOUT_S = 5.0


class _End:
    """Marks the end of the stream in the queue."""


class _Failure:
    """Carries the producer's exception to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _put_unless_stopped(slots: queue.Queue, entry: object, stop: threading.Event) -> bool:
    """Put `entry`, waiting for room; give up (False) once `stop` is set."""
    while not stop.is_set():
        try:
            slots.put(entry, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _produce(iterable: Iterable[object], slots: queue.Queue, stop: threading.Event) -> None:
    """The thread's work. A plain function, so the thread holds no reference to the prefetcher."""
    try:
        for item in iterable:
            if not _put_unless_stopped(slots, item, stop):
                return
        _put_unless_stopped(slots, _End(), stop)
    except BaseException as err:  # forwarded to the consumer, never swallowed
        _put_unless_stopped(slots, _Failure(err), stop)


class ThreadedPrefetcher(Generic[T]):
    """Iterate over `iterable` while a background thread reads up to `depth` items ahead."""

    def __init__(self, iterable: Iterable[T], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._slots: queue.Queue = queue.Queue(maxsize=depth - 1)
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(
            target=_produce, args=(iterable, self._slots, self._stop), name="prefetcher", daemon=True
        )
        self._thread.start()

    def __iter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        entry = self._take()
        if isinstance(entry, _End):
            self.close()
            raise StopIteration
        if isinstance(entry, _Failure):
            self.close()
            raise entry.error
        return entry

    def _take(self) -> object:
        while True:
            try:
                return self._slots.get(timeout=POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self._slots.empty():
                    self.close()
                    raise RuntimeError("the prefetch thread ended without an end marker") from None

    def close(self) -> None:
        """Stop the thread and wait for it; safe to call more than once."""
        self._finished = True
        self._stop.set()
        while True:  # free a put() that is waiting for room
            try:
                self._slots.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT_S)

    def __enter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, "_thread"):
            self.close()


def threaded_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    num_threads: int = 8,
    max_in_flight: int | None = None,
) -> Iterator[R]:
    """Yield `fn(item)` for each item, computed on `num_threads` threads, in input order."""
    if num_threads < 1:
        raise ValueError(f"num_threads must be at least 1, got {num_threads}")
    limit = max_in_flight or 2 * num_threads
    pending: deque[Future[R]] = deque()
    source = iter(items)
    pool = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="threaded_map")
    try:
        for item in source:
            pending.append(pool.submit(fn, item))
            if len(pending) >= limit:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
