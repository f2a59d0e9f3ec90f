"""Exercise 02: keep the accelerator fed with threads.

Two tools you will reuse in every later module:

* `ThreadedPrefetcher(iterable, depth)`: a background thread pulls items from
  `iterable` into a bounded buffer, so the next batch loads while the model
  works on this one.
* `threaded_map(fn, items, num_threads, max_in_flight)`: run `fn` over `items`
  on a pool of threads (I/O-bound reads, Pillow decodes), results in input order.

Both must be correct before they are fast: same items, same order, bounded
memory, errors that reach the caller, and no thread left running afterwards.
The grader checks this in steps; you can stop after any step with something that passes it:

  step 1  the prefetcher yields every item in order and reads ahead    TODO(ex02, step 1)
  step 2  the prefetcher is bounded, surfaces errors and closes        TODO(ex02, step 2)
  step 3  threaded_map keeps order and uses its threads                TODO(ex02, step 3)
  step 4  threaded_map is bounded, surfaces errors and closes          TODO(ex02, step 4)
  step 5  speed: both are timed against a baseline (nothing new to write if 1-4 pass)

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
    Step 1
    - yields exactly the items of `iterable` (the very same objects), in the same order, whatever
      they are: None, a string such as "END", a tuple, an exception object or StopIteration are items
      like any other; once exhausted, next() keeps raising StopIteration;
    - starts reading ahead on its own thread as soon as it is created, and keeps reading until
      `depth` items wait for the consumer (for any depth >= 1, not only the default);
    - only that one thread advances `iterable`: a generator or a file is not thread-safe.
    Step 2
    - never pulls more than `depth` items ahead of the consumer (plus the one the thread is
      busy handing over), so memory stays bounded;
    - an exception raised by `iterable`, even on its first item, reaches the consumer from
      `next()` after the items before it, with its original type, message and traceback,
      and the thread ends;
    - `close()` (also before any `next()`, while the thread waits for room, or a second time),
      leaving a `with` block, or breaking out of a `for` loop and dropping the prefetcher stops the
      thread within a second or two; no thread is left running afterwards;
    - two prefetchers alive at once never share state: closing one leaves the other running.
    """

    def __init__(self, iterable: Iterable[T], depth: int = 2) -> None:
        # TODO(ex02, step 1): start reading ahead here.
        #   Build a buffer that holds up to `depth` items and a background thread that pulls the
        #   items of `iterable` into it, one by one, then marks the end of the stream.
        #   Why: next() then finds the item already loaded instead of waiting for it.
        #   Mind: the end marker must be something no iterable can ever yield (see the contract),
        #   and the thread must not keep `self` alive, or dropping the prefetcher can never stop it.
        raise NotImplementedError("TODO(ex02, step 1) in exercises/ex02_threaded_prefetch.py: ThreadedPrefetcher.__init__")

    def __iter__(self) -> ThreadedPrefetcher[T]:
        return self

    def __next__(self) -> T:
        # TODO(ex02, step 1): hand the consumer the next item from the buffer; at the end marker,
        #   end the iteration (and keep ending it if called again).
        #   Why wait with a time limit: if the thread died, a wait without one never returns.
        raise NotImplementedError("TODO(ex02, step 1) in exercises/ex02_threaded_prefetch.py: ThreadedPrefetcher.__next__")

    def close(self) -> None:
        # TODO(ex02, step 2): make the prefetcher safe to stop and to fail (what step 2 checks).
        #   - Here: tell the thread to stop, free it if it waits for room in a full buffer, and
        #     wait for it to end, with a time limit. Safe before any next() and when called twice.
        #   - In the thread and next(): an exception from `iterable` travels to the consumer and is
        #     raised from next() after the items before it, as the same exception object.
        #   - Everything (buffer, stop signal, markers) belongs to this instance, so two
        #     prefetchers can run side by side.
        #   Why: a training job that stops early, or whose storage fails, must not hang or end quietly.
        raise NotImplementedError("TODO(ex02, step 2) in exercises/ex02_threaded_prefetch.py: ThreadedPrefetcher.close")

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

    Contract (the grader checks each point):
    Step 3
    - results in the order of `items`, for any `num_threads` >= 1 and any iterable;
    - whatever `fn` returns (None, an exception object, ...) is a result: that very object is yielded;
    - up to `num_threads` calls of `fn` run at once, never more;
    - `items` is advanced by one thread at a time.
    Step 4
    - it keeps `max_in_flight` items (default 2 * num_threads) submitted but not yet yielded, and
      never more, also when that is below num_threads, so an endless `items` is fine;
    - an exception from `fn` is raised to the caller in that item's place, after the results before it;
    - the threads are shut down when the results are exhausted, on error, and when the caller
      stops early (generator close); two calls alive at once never share threads or results.
    """
    # TODO(ex02, step 3): run `fn` on `num_threads` threads and yield the results in input order.
    #   Hand several items to the threads before waiting on the first result, so they work at once;
    #   take results in the order the items went in, not in the order they finish.
    #   Shut the threads down when the results run out.
    # TODO(ex02, step 4): then bound it and make it fail loudly and stop cleanly (see the contract).
    #   Why: `items` may be endless (a stream, a sampler), and a failed read must stop the epoch.
    raise NotImplementedError(
        "TODO(ex02, step 3) in exercises/ex02_threaded_prefetch.py: threaded_map (step 4 continues in the same function)")
