"""Exercise 02, reference solution: a bounded background prefetcher and an ordered thread map.

Each piece a wrong implementation could get wrong is a small public method or class of its own (the queue the
thread and the consumer share, how the thread is started, how an entry becomes an item; the window, the pool,
how a result is delivered), so that tests/planted/ex02_* replace one piece and keep the rest.
"""

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
    """The type of END."""

    def __repr__(self) -> str:
        return "END"


END = _End()
"""Put by the thread after the last item. A private object compared by identity (`is`): no item can be it."""


class Failure:
    """Carries the producer's exception to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Handoff:
    """What the thread and the consumer share: a queue of at most `depth` entries and the signal to stop."""

    def __init__(self, depth: int) -> None:
        self.entries: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()

    def put(self, entry: object) -> bool:
        """Put `entry`, waiting for room; give up (False) once `stop` is set."""
        while not self.stop.is_set():
            try:
                self.entries.put(entry, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def get(self) -> object:
        """The next entry; queue.Empty if none comes within POLL_S."""
        return self.entries.get(timeout=POLL_S)

    def drain(self) -> None:
        """Throw away what is queued: this frees a put() that waits for room."""
        while True:
            try:
                self.entries.get_nowait()
            except queue.Empty:
                return


def produce(iterable: Iterable[object], handoff: Handoff) -> None:
    """The thread's work. A plain function, so the thread holds no reference to the prefetcher."""
    try:
        for item in iterable:
            if not handoff.put(item):
                return
        handoff.put(END)
    except BaseException as err:  # forwarded to the consumer, never swallowed
        handoff.put(Failure(err))


class ThreadedPrefetcher(Generic[T]):
    """Iterate over `iterable` while a background thread reads up to `depth` items ahead."""

    handoff_type = Handoff
    join_timeout_s = JOIN_TIMEOUT_S  # how long close() waits for the thread

    def __init__(self, iterable: Iterable[T], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._handoff = self.handoff_type(depth)
        self._finished = False
        self._thread = self.start_producer(iterable, self._handoff)

    def start_producer(self, iterable: Iterable[T], handoff: Handoff) -> threading.Thread:
        """Start the one thread that moves the items of `iterable` into `handoff`, and return it."""
        thread = threading.Thread(target=produce, args=(iterable, handoff), name="prefetcher", daemon=True)
        thread.start()
        return thread

    def __iter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        try:
            return self.item_of(self.take())
        except BaseException:  # the end of the stream, the producer's error, or the wait cut short
            self.close()
            raise

    def item_of(self, entry: object) -> T:
        """The item an entry carries; StopIteration at END, the producer's own exception at a Failure."""
        if entry is END:
            raise StopIteration
        if isinstance(entry, Failure):
            raise entry.error
        return entry

    def take(self) -> object:
        """Wait for the next entry; RuntimeError if the thread has ended without putting END or a Failure."""
        while True:
            try:
                return self._handoff.get()
            except queue.Empty:
                if not self._thread.is_alive() and self._handoff.entries.empty():
                    raise RuntimeError("the prefetch thread ended without an end marker") from None

    def close(self) -> None:
        """Stop the thread and wait for it; safe to call more than once."""
        self._finished = True
        self._handoff.stop.set()
        self._handoff.drain()
        if self._thread is not threading.current_thread():
            self._thread.join(self.join_timeout_s)

    def __enter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, "_thread"):
            self.close()


class ThreadMap(Generic[T, R]):
    """One call of threaded_map: `fn` over items on a pool of threads, at most `window()` items pending."""

    def __init__(self, fn: Callable[[T], R], num_threads: int, max_in_flight: int | None) -> None:
        self.fn, self.num_threads, self.max_in_flight = fn, num_threads, max_in_flight
        self.pending: deque[Future[R]] = deque()  # submitted, not yet yielded, in input order

    def window(self) -> int:
        """How many items may be submitted but not yet yielded."""
        return self.max_in_flight or 2 * self.num_threads

    def start_pool(self) -> ThreadPoolExecutor:
        """A pool of this call's own, with exactly `num_threads` threads."""
        return ThreadPoolExecutor(max_workers=self.num_threads, thread_name_prefix="threaded_map")

    def submit(self, pool: ThreadPoolExecutor, item: T) -> Future[R]:
        return pool.submit(self.fn, item)

    def deliver(self, future: Future[R]) -> Iterator[R]:
        """What the caller gets for one item, in its turn: its result, or its exception raised."""
        yield future.result()

    def stop_pool(self, pool: ThreadPoolExecutor) -> None:
        """Cancel what has not started and shut the threads down (at the end, on error, or on an early stop)."""
        for future in self.pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)

    def results(self, items: Iterable[T]) -> Iterator[R]:
        pool = self.start_pool()
        try:
            for item in items:
                self.pending.append(self.submit(pool, item))
                if len(self.pending) >= self.window():
                    yield from self.deliver(self.pending.popleft())
            while self.pending:
                yield from self.deliver(self.pending.popleft())
        finally:
            self.stop_pool(pool)


def threaded_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    num_threads: int = 8,
    max_in_flight: int | None = None,
) -> Iterator[R]:
    """Yield `fn(item)` for each item, computed on `num_threads` threads, in input order."""
    if num_threads < 1:
        raise ValueError(f"num_threads must be at least 1, got {num_threads}")
    yield from ThreadMap(fn, num_threads, max_in_flight).results(items)
