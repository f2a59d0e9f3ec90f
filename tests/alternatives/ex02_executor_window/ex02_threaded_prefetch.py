"""Exercise 02, another route: a prefetcher with no buffer of items at all, only a window of `depth`
futures, each one pull of the source on a one-thread executor (so the source is advanced by one thread,
in order); and a threaded_map that sleeps in concurrent.futures.wait(FIRST_COMPLETED) instead of
blocking on the oldest future's result()."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

POLL_S = 0.05
JOIN_TIMEOUT_S = 5.0
_EXHAUSTED = object()  # what a pull returns past the end: private, so no source can yield it


def _pull(iterator: Iterator[object]) -> object:
    """One item of the source, or _EXHAUSTED (a StopIteration is not left to travel through a future)."""
    return next(iterator, _EXHAUSTED)


class ThreadedPrefetcher(Generic[T]):
    """Iterate over `iterable` while `depth` pulls of it run ahead on a one-thread executor."""

    def __init__(self, iterable: Iterable[T], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._iterator = iter(iterable)
        self._done = False
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetcher-window")
        self._window: deque[Future[object]] = deque(self._pool.submit(_pull, self._iterator) for _ in range(depth))

    def __iter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        oldest = self._window.popleft()
        while not oldest.done():
            wait([oldest], timeout=POLL_S)
        try:
            value = oldest.result()
        except BaseException:
            self.close()
            raise
        if value is _EXHAUSTED:
            self.close()
            raise StopIteration
        self._window.append(self._pool.submit(_pull, self._iterator))
        return value  # type: ignore[return-value]

    def close(self) -> None:
        """Cancel the pulls not started, let the running one finish (bounded wait); safe to call twice."""
        self._done = True
        running = [future for future in self._window if not future.cancel()]  # a cancelled one never "completes"
        self._pool.shutdown(wait=False, cancel_futures=True)
        wait(running, timeout=JOIN_TIMEOUT_S)
        self._window.clear()

    def __enter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, "_window"):
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
    limit = 2 * num_threads if max_in_flight is None else max_in_flight
    source = iter(items)
    in_order: deque[Future[R]] = deque()
    exhausted = False
    pool = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="threaded_map-wait")
    try:
        while True:
            while not exhausted and len(in_order) < limit:
                item = next(source, _EXHAUSTED)
                if item is _EXHAUSTED:
                    exhausted = True
                else:
                    in_order.append(pool.submit(fn, item))  # type: ignore[arg-type]
            if not in_order:
                return
            running = [future for future in in_order if not future.done()]
            if in_order[0] in running:
                wait(running, timeout=POLL_S, return_when=FIRST_COMPLETED)
            while in_order and in_order[0].done():
                yield in_order.popleft().result()
    finally:
        for future in in_order:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
