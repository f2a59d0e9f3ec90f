"""Exercise 02: keep the accelerator fed with threads.

Two tools you will reuse in every later module:

* `ThreadedPrefetcher(iterable, depth)`: a background thread pulls items from
  `iterable` into a bounded queue, so the next batch loads while the model
  works on this one.
* `threaded_map(fn, items, num_threads, max_in_flight)`: run `fn` over `items`
  on a pool of threads (I/O-bound reads, Pillow decodes), results in input order.

Both must be correct before they are fast: same items, same order, bounded
memory, errors that reach the caller, and no thread left running afterwards.
Grade: `pytest grader/test_ex02_threaded_prefetch.py`. Hints: `make hint EX=ex02`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class ThreadedPrefetcher(Generic[T]):
    """Iterate over `iterable` while a background thread reads ahead.

    Contract (the grader checks each point):
    - yields exactly the items of `iterable`, in the same order;
    - never pulls more than `depth` items ahead of the consumer (plus the one
      the thread is busy handing over), so memory stays bounded;
    - starts reading ahead as soon as it is created;
    - an exception raised by `iterable` reaches the consumer from `next()`,
      with its original type, message and traceback;
    - `close()`, leaving a `with` block, or breaking out of a `for` loop and
      dropping the prefetcher stops the thread within a second or two;
      no thread is left running afterwards.
    """

    def __init__(self, iterable: Iterable[T], depth: int = 2) -> None:
        # TODO(ex02a): create a queue.Queue(maxsize=depth) and a stop Event, then
        # start a daemon thread that puts each item of `iterable` into the queue,
        # then an end marker; if iterating raises, put the exception instead.
        # Careful: if the thread's target is a bound method of `self`, the thread
        # keeps `self` alive and dropping the prefetcher can never stop it.
        raise NotImplementedError("TODO(ex02a) in exercises/ex02_threaded_prefetch.py: ThreadedPrefetcher.__init__")

    def __iter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __next__(self) -> T:
        # TODO(ex02a): take the next entry from the queue (wait with a timeout in
        # a loop, so a dead thread cannot hang you); raise StopIteration at the
        # end marker, re-raise a forwarded exception, else return the item.
        raise NotImplementedError("TODO(ex02a) in exercises/ex02_threaded_prefetch.py: ThreadedPrefetcher.__next__")

    def close(self) -> None:
        # TODO(ex02a): set the stop event, empty the queue so a blocked put()
        # returns, and join the thread (with a timeout). Safe to call twice.
        raise NotImplementedError("TODO(ex02a) in exercises/ex02_threaded_prefetch.py: ThreadedPrefetcher.close")

    def __enter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Dropping the prefetcher (e.g. after `break`) stops its thread too.
        try:
            self.close()
        except Exception:
            pass


def threaded_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    num_threads: int = 8,
    max_in_flight: int | None = None,
) -> Iterator[R]:
    """Yield `fn(item)` for each item, computed on `num_threads` threads, in input order.

    Contract: results in the order of `items`; at most `max_in_flight` items
    (default 2 * num_threads) submitted but not yet yielded, so an endless
    `items` is fine; an exception from `fn` is raised to the caller; the
    threads are shut down when the results are exhausted, on error, and when
    the caller stops early (generator close).
    """
    # TODO(ex02b): use concurrent.futures.ThreadPoolExecutor and a
    # collections.deque of futures: submit until max_in_flight are pending,
    # then yield the oldest future's result and submit the next item.
    # Shut the pool down in a `finally` (cancel what is still pending).
    raise NotImplementedError("TODO(ex02b) in exercises/ex02_threaded_prefetch.py: threaded_map")
