"""Checks for exercise 02 (threads). Storage and the accelerator step are emulated with
sleeps, so the figures depend on the technique, not on how many cores you have.

Every argument is tried at several values (a depth of 1, 3 and 8; windows below, at and above
the thread count, and the default), every value a source may legally yield is passed through
(None, marker-like strings and tuples, exception objects), and two instances run side by side:
an implementation honoured at one value only, or one whose markers can collide with data, fails.
"""

from __future__ import annotations

import gc
import itertools
import math
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np

from grader.support import dataset_samples, no_leaks, require, within
from loaderlab.baselines import sequential_reads
from loaderlab.bench import Comparison, compare
from loaderlab.sim import SimulatedGPU, SlowStorage

# What these checks and the exercise import: a waiting grading process imports it once (grader.preload).
PRELOAD = ("numpy", "PIL.Image")

IO_LATENCY_MS = 10.0
IO_THREADS = 8
# Timed targets, sleep-bound so they do not depend on cores. Measured on a shared 2-core machine, ci profile,
# 3 runs each: solutions/ 7.62-7.64x and 1.92x; the planted sequential map 1.00x (reads); the planted
# not-in-background prefetcher 1.00x (prefetch); the two alternatives 7.40x/7.50x and 1.92x (1 run each).
# With one busy-loop process beside them (2 runs): solutions/ 6.92-7.70x and 1.92x.
IO_TARGET = 5.0          # 8 threads on sleep-bound reads: ideal 8x
STEP_MS = 20.0
LOAD_MS = 20.0
PREFETCH_TARGET = 1.6    # load == step: ideal 2x

DEPTHS = (1, 3, 8)       # depth 1 is the edge (Queue(maxsize=0) is unbounded); 8 is more than any default
SETTLE_S = 3.0           # how long a check gives the background thread to fill its buffer
MAP_WINDOWS = ((4, 8), (4, 2), (8, 1), (1, None), (3, None))  # (num_threads, max_in_flight): above, below, default
MARKER_WORDS = ("END", "STOP", "DONE", "__end__", "__END__")


class CountingSource:
    """An iterable that counts how many items were pulled from it (and may be slow or fail)."""

    def __init__(self, count: int | None, delay_s: float = 0.0, fail_at: int | None = None) -> None:
        self.count, self.delay_s, self.fail_at = count, delay_s, fail_at
        self.pulled = 0

    def __iter__(self) -> Iterator[int]:
        return self._items()

    def _items(self) -> Iterator[int]:
        for index in itertools.count() if self.count is None else range(self.count):
            if index == self.fail_at:
                raise ValueError(f"planted failure at item {index}")
            if self.delay_s:
                time.sleep(self.delay_s)
            self.pulled += 1
            yield index


class OneThreadAtATime:
    """An iterator that, like a generator or a file, must not be advanced by two threads at once.

    It notes when that happens instead of failing at random, as a real one would.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.next_index = 0
        self.busy = False
        self.overlaps = 0

    def __iter__(self) -> OneThreadAtATime:
        return self

    def __next__(self) -> int:
        if self.busy:
            self.overlaps += 1
        self.busy = True
        try:
            time.sleep(0.0005)  # a read in progress: the window in which a second caller would collide
            if self.next_index >= self.count:
                raise StopIteration
            self.next_index += 1
            return self.next_index - 1
        finally:
            self.busy = False


class AlwaysEqual:
    """An item that claims to equal anything (some wrapper types do): only `is` tells it from a marker."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "AlwaysEqual()"


def awkward_values() -> list[object]:
    """Values a source may legally yield that an implementation may mistake for its own markers."""
    values: list[object] = [0, None, 1, *MARKER_WORDS, "", False, []]
    values += [("end", None), ("error", ValueError("a tuple shaped like an error envelope")),
               (None, KeyError("another envelope shape")), ("item", 2)]
    values += [ValueError("an exception object yielded as a plain value"),
               StopIteration("a StopIteration instance yielded as a plain value"), StopIteration, KeyError]
    values += [np.arange(3), AlwaysEqual(), None, 3]
    return values


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `condition` until it holds or `timeout_s` passes; whether it held."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def drain(iterator: Iterable[object], received: list[object], pause_s: float = 0.0) -> Exception | None:
    """Consume `iterator` into `received`; the exception it raised, if any."""
    try:
        for item in iterator:
            received.append(item)
            if pause_s:
                time.sleep(pause_s)
    except Exception as err:  # judged by the caller
        return err
    return None


def first_difference(got: list[object], expected: list[object]) -> int:
    return next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))


def assert_passed_through(what: str, origin: str, values: list[object], received: list[object],
                          error: Exception | None) -> None:
    """The same objects, in order, none raised, none mistaken for an end marker. `origin`: how the values arose."""
    done = len(received)
    if error is not None:
        raise AssertionError(
            f"{what}: next() raised {type(error).__name__}: {error} after {done} of {len(values)} items, at the "
            f"item {values[min(done, len(values) - 1)]!r}. That value was {origin} as a plain value and must come out "
            "as one. Tell your own markers (end, error) from items without looking at the item: an exception "
            "object, a tuple or a numpy array are items like any other.")
    assert done <= len(values), (
        f"{what}: {done} items came out of {len(values)} that went in: an item was handed out twice (put once, taken "
        "twice?), or the end marker was taken for an item. Each item goes through the buffer once.")
    for index, (sent, got) in enumerate(zip(values, received)):
        assert got is sent, (
            f"{what}: item {index} went in as {sent!r} and came out as {got!r}. Pass the very same objects through.")
    assert done == len(values), (
        f"{what}: the stream ended after {done} of {len(values)} items, at the item {values[min(done, len(values) - 1)]!r}: "
        "it was taken for your end marker. A marker must be an object no source can yield, compared with `is`.")


# ---- ThreadedPrefetcher, step 1: in order, reading ahead ------------------------------

def prefetcher_yields_every_item_in_order(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    with no_leaks("ThreadedPrefetcher, consumed to the end"):
        source = OneThreadAtATime(100)
        got = within(20, "ThreadedPrefetcher over an iterator", lambda: list(prefetcher(source, depth=4)))
        assert not source.overlaps, (
            f"the source was advanced by two threads at once ({source.overlaps} times). A generator or a file "
            "is not thread-safe: only one thread at a time may call next() on it (one producer thread).")
        assert got == list(range(100)), f"over an iterator of 100 items, got {len(got)} items, first ones {got[:8]}"
        for depth in DEPTHS:
            for count, pause_s, pace in ((1000, 0.0, "a fast consumer"), (40, 0.002, "a consumer slower than the source")):
                received: list[object] = []
                error = within(20, f"ThreadedPrefetcher(range({count}), depth={depth})",
                               lambda: drain(prefetcher(range(count), depth=depth), received, pause_s))
                assert error is None, f"with depth={depth}, next() raised {type(error).__name__}: {error}"
                assert received == list(range(count)), (
                    f"with depth={depth} and {pace}, got {len(received)} of {count} items; the first difference is "
                    f"at index {first_difference(received, list(range(count)))}. Every item must come out once, in the "
                    "order it went in: the stream ends only after the items before the end have been handed over.")
        for name, items in (("an empty source", []), ("a source of one item", ["only"])):
            got = within(10, name, lambda: list(prefetcher(iter(items), depth=2)))
            assert got == items, f"{name} must give {items!r}, got {got!r}"
        loader = prefetcher(range(3), depth=2)
        within(10, "consuming range(3)", lambda: list(loader))
        again: list[object] = []
        error = within(5, "a second loop over a finished prefetcher", lambda: drain(loader, again))
        assert error is None and not again, (
            f"after the end, next() {'raised ' + repr(error) if error else f'gave {again!r}'}. An iterator must keep "
            "raising StopIteration once it is exhausted, so a second `for` loop over it simply does nothing.")


def prefetcher_passes_any_value_through(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    values = awkward_values()
    received: list[object] = []
    what = "a source yielding None, marker-like values and exception objects"
    with no_leaks(f"ThreadedPrefetcher over {what}"):
        error = within(5, f"ThreadedPrefetcher over {what}", lambda: drain(prefetcher(iter(values), depth=2), received))
        assert_passed_through(what, "yielded by the source", values, received, error)


def prefetcher_reads_ahead_in_background(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    for depth in DEPTHS:
        with no_leaks(f"ThreadedPrefetcher(depth={depth}), consumed to the end"):
            source = CountingSource(depth + 20)
            loader = prefetcher(source, depth=depth)
            wait_until(lambda: source.pulled >= depth, SETTLE_S)
            pulled = source.pulled
            within(10, "consuming the rest", lambda: list(loader))  # the thread ends at the end (close() is step 2)
        assert pulled > 0, (
            f"{SETTLE_S:.0f} s after creating ThreadedPrefetcher(depth={depth}), nothing had been pulled from the source. "
            "A prefetcher must start reading ahead on its own thread as soon as it is created, "
            "not when next() is called.")
        assert pulled >= depth, (
            f"{SETTLE_S:.0f} s after creating ThreadedPrefetcher(depth={depth}) with nobody consuming, only {pulled} "
            f"items had been pulled: it should hold {depth} ready. Is depth really the size of your buffer? "
            "A prefetcher honours depth at every value, not only at the default.")


# ---- ThreadedPrefetcher, step 2: bounded, errors, shutdown ----------------------------

def prefetcher_is_bounded(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    for depth in DEPTHS:
        with no_leaks(f"ThreadedPrefetcher(depth={depth}).close()"):
            source = CountingSource(200)
            loader = prefetcher(source, depth=depth)
            time.sleep(0.3)
            worst = source.pulled
            for consumed, _ in enumerate(itertools.islice(loader, 20), start=1):
                time.sleep(0.005)
                worst = max(worst, source.pulled - consumed)
            within(5, "close()", loader.close)
        assert worst <= depth + 1, (
            f"with depth={depth}, the source was up to {worst} items ahead of the consumer. At most depth "
            "items may wait in the buffer, plus the one the thread is handing over, for every depth >= 1 "
            "(mind queue.Queue(maxsize=0): that one has no bound at all).")


def prefetcher_surfaces_producer_errors(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    cases = ((7, 2, False, "a source that fails at item 7"),
             (7, 8, True, "a source that failed at item 7 before the consumer started (depth=8)"),
             (0, 2, False, "a source that fails on its very first item"))
    for fail_at, depth, consumer_late, what in cases:
        received: list[object] = []

        def consume() -> Exception | None:
            source = CountingSource(50, fail_at=fail_at)
            try:
                loader = prefetcher(source, depth=depth)
            except ValueError as err:
                raise AssertionError(f"with {what}, ThreadedPrefetcher(...) itself raised {err!r}. Creating it only "
                                     "starts the thread; the source's error must come out of next(), where the "
                                     "consumer reads.") from None
            if consumer_late:
                wait_until(lambda: source.pulled >= fail_at, SETTLE_S)
                time.sleep(0.2)
            return drain(loader, received)

        with no_leaks(f"a prefetcher over {what}"):
            error = within(10, f"consuming {what}", consume)
        assert error is not None, (
            f"with {what}, the consumer saw the stream simply end after {len(received)} items. An exception in "
            "the producer thread must be forwarded and raised from next(), never swallowed: a silent short "
            "epoch is the worst kind of bug.")
        assert isinstance(error, ValueError) and "planted failure" in str(error), (
            f"with {what}, the consumer got {type(error).__name__}: {error} instead of the source's own "
            "ValueError: forward the original exception object.")
        assert received == list(range(fail_at)), (
            f"with {what}, the consumer received {received!r} before the error; the {fail_at} items before the "
            "failure must arrive first, then the error, in the order they happened.")
        frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
        assert "_items" in frames, (
            "the exception reached you without the producer's traceback (it should show where the source "
            "failed). Re-raise the original exception object rather than creating a new one.")


def prefetcher_stops_when_closed_or_dropped(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    with no_leaks("close() before any next(), while the source is busy with an item"):
        loader = prefetcher(CountingSource(None, delay_s=0.2), depth=2)
        within(5, "close() before any next()", loader.close)
    with no_leaks("close() while the thread waits for room in a full buffer"):
        source = CountingSource(None)
        loader = prefetcher(source, depth=2)
        wait_until(lambda: source.pulled >= 2, SETTLE_S)
        time.sleep(0.1)
        within(5, "close() while the thread waits for room", loader.close)
    with no_leaks("close() after next(), called twice"):
        loader = prefetcher(CountingSource(None, delay_s=0.002), depth=2)
        next(loader)
        within(5, "close()", loader.close)
        within(5, "a second close()", loader.close)
    with no_leaks("leaving a `with ThreadedPrefetcher(...)` block"):
        with prefetcher(CountingSource(None), depth=2) as loader:
            next(loader)
    with no_leaks("breaking out of a for loop and dropping the prefetcher"):
        for index, _ in enumerate(prefetcher(CountingSource(None), depth=2)):
            if index == 3:
                break
        gc.collect()


def prefetcher_instances_are_independent(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    with no_leaks("two prefetchers at once"):
        first, second = prefetcher(range(100), depth=2), prefetcher(range(1000, 1100), depth=3)
        pairs: list[object] = []
        error = within(20, "two prefetchers consumed in turn", lambda: drain(zip(first, second), pairs))
        leftover: list[object] = []
        error = error or within(5, "the end of the second prefetcher", lambda: drain(second, leftover))
        assert error is None and not leftover and pairs == list(zip(range(100), range(1000, 1100))), (
            f"two prefetchers consumed in turn gave {pairs[:3]}..."
            f"{' then raised ' + repr(error) if error else f' and {leftover[:3]} left over'}: each must yield its "
            "own items: no state may be shared between instances. Keep every piece of it (buffer, stop signal, end "
            "marker) on the instance, never in a global, a class attribute or a default argument.")
        endless, finite = prefetcher(CountingSource(None), depth=2), prefetcher(range(50), depth=2)
        head = [next(endless), next(finite), next(endless), next(finite)]
        within(5, "closing the first prefetcher", endless.close)
        rest: list[object] = []
        error = within(10, "consuming the second after closing the first", lambda: drain(finite, rest))
    assert error is None and head[1::2] + rest == list(range(50)), (
        f"after close() on one prefetcher, the other {'raised ' + repr(error) if error else f'gave {len(rest)} more items'}"
        " instead of its remaining 48. close() must stop only its own thread: no state may be shared between "
        "instances (is the stop signal a class attribute or a global?).")


# ---- threaded_map, step 3: in order, on its threads -----------------------------------

def _slow_square(x: int) -> int:
    time.sleep(0.001 * ((x * 7) % 5))  # uneven durations: completion order differs from input order
    return x * x


def _paced(x: int) -> int:
    time.sleep(0.005)
    return x


def _identity(x: object) -> object:
    return x


def threaded_map_keeps_order(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
    with no_leaks("threaded_map"):
        for threads, window in ((1, None), (4, None), (8, None), (8, 3), (4, 1)):
            got = within(30, "threaded_map over 200 items",
                         lambda: list(threaded_map(_slow_square, range(200), num_threads=threads, max_in_flight=window)))
            assert got == [x * x for x in range(200)], (
                f"with num_threads={threads}, max_in_flight={window}, results are not fn(item) in input order "
                f"(got {len(got)} results, first ones {got[:8]}). Yield results in submission order, "
                "not as they complete (as_completed reorders).")
        items = OneThreadAtATime(60)
        got = within(10, "threaded_map over an iterator", lambda: list(threaded_map(_slow_square, items, num_threads=4)))
        assert not items.overlaps, (
            f"`items` was advanced by two threads at once ({items.overlaps} times). A generator is not "
            "thread-safe: pull the items from one thread, or one at a time.")
        assert got == [x * x for x in range(60)], "threaded_map must accept any iterable, an iterator included"
        assert within(10, "an empty input", lambda: list(threaded_map(_slow_square, [], num_threads=4))) == []


def threaded_map_passes_any_result_through(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
    values = awkward_values()
    received: list[object] = []
    what = "threaded_map whose fn returns None, marker-like values and exception objects"
    with no_leaks(what):
        error = within(5, what, lambda: drain(threaded_map(_identity, values, num_threads=3), received))
        assert_passed_through(what, "returned by fn", values, received, error)


def threaded_map_uses_its_threads(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
    for threads, window in ((1, None), (3, None), (6, 12)):
        lock, running, peak = threading.Lock(), [0], [0]

        def tracked(x: int) -> int:
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.02)
            with lock:
                running[0] -= 1
            return x

        with no_leaks("threaded_map"):
            within(30, "threaded_map", lambda: list(threaded_map(tracked, range(8 * threads), num_threads=threads,
                                                                 max_in_flight=window)))
        assert math.ceil(0.66 * threads) <= peak[0] <= threads, (
            f"with num_threads={threads} (max_in_flight={window}), up to {peak[0]} calls of fn ran at the same "
            f"time; expected up to {threads}, never more. Start exactly num_threads threads, and submit several "
            "items before waiting on the first result.")


# ---- threaded_map, step 4: bounded, errors, shutdown ----------------------------------

def threaded_map_is_bounded(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
    for threads, window in MAP_WINDOWS:
        limit = window if window is not None else 2 * threads
        setting = f"num_threads={threads}, max_in_flight={window}" + (f" (so {limit})" if window is None else "")
        source = CountingSource(5000)  # "endless" for this purpose, yet a runaway reader stops
        worst = 0
        with no_leaks(f"threaded_map ({setting}) closed early"):
            results = threaded_map(_paced, source, num_threads=threads, max_in_flight=window)
            for consumed, _ in enumerate(itertools.islice(results, 30), start=1):
                worst = max(worst, source.pulled - consumed)
            assert worst <= limit, (
                f"with {setting}, {worst} items were pulled but not yet yielded. Keep at most max_in_flight "
                "items submitted and not yet yielded (default 2 * num_threads), for every value, also below "
                "num_threads: the input may be endless. (Executor.map reads the whole input at once.)")
            assert worst >= limit - 1, (
                f"with {setting}, at most {worst} items were ever in flight while the consumer waited; it should "
                f"keep {limit} in flight (max_in_flight, or 2 * num_threads when it is None).")
            within(10, "closing threaded_map's generator", results.close)


def threaded_map_surfaces_errors(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")

    def fails_on(bad: int) -> Callable[[int], int]:
        def fn(x: int) -> int:
            if x == bad:
                raise KeyError(f"planted failure on item {bad}")
            time.sleep(0.01)  # the failure comes back before the results ahead of it
            return x
        return fn

    for bad, threads, window in ((13, 4, None), (13, 8, 1), (0, 2, 3)):
        received: list[object] = []
        setting = f"num_threads={threads}, max_in_flight={window}"
        with no_leaks(f"threaded_map after an error ({setting})"):
            error = within(20, "threaded_map with a failing fn",
                           lambda: drain(threaded_map(fails_on(bad), range(100), num_threads=threads, max_in_flight=window),
                                         received))
        assert error is not None, (
            f"fn raised KeyError on item {bad}, but threaded_map ({setting}) finished without raising it "
            f"after {len(received)} results: an error must reach the caller, never be skipped.")
        assert isinstance(error, KeyError) and f"planted failure on item {bad}" in str(error), (
            f"the original error was lost: got {type(error).__name__}: {error}")
        assert received == list(range(bad)), (
            f"with {setting}, the caller received {len(received)} results before the error (first ones "
            f"{received[:6]}), expected the {bad} results before item {bad}: the error takes that item's place "
            "in the output, after the results before it.")


def threaded_map_calls_are_independent(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
    with no_leaks("two threaded_maps at once"):
        first = threaded_map(_slow_square, range(50), num_threads=3, max_in_flight=4)
        second = threaded_map(_identity, range(100, 150), num_threads=2)
        pairs: list[object] = []
        error = within(20, "two threaded_maps consumed in turn", lambda: drain(zip(first, second), pairs))
        leftover: list[object] = []
        error = error or within(5, "the end of the second threaded_map", lambda: drain(second, leftover))
        assert error is None and not leftover and pairs == [(x * x, x + 100) for x in range(50)], (
            f"two threaded_maps consumed in turn gave {pairs[:3]}..."
            f"{' then raised ' + repr(error) if error else f' and {leftover[:3]} left over'}: each must yield its "
            "own results: no pool or results may be shared between calls. Keep them local to the call, never in a global.")
        early, late = threaded_map(_identity, CountingSource(None), num_threads=2), threaded_map(_identity, range(30), num_threads=2)
        head = [next(early), next(late)]
        within(10, "closing the first threaded_map", early.close)
        rest: list[object] = []
        error = within(10, "consuming the second after closing the first", lambda: drain(late, rest))
    assert error is None and head[1:] + rest == list(range(30)), (
        f"after the first threaded_map was closed, the second {'raised ' + repr(error) if error else f'gave {len(rest)} more results'}"
        " instead of its remaining 29. Closing one must shut down only its own threads: no pool or results may "
        "be shared between calls (a shared pool is shut down for all of them).")


# ---- throughput --------------------------------------------------------------------

def io_reads_with_threads(ex: ModuleType) -> Comparison:
    threaded_map = require(ex, "threaded_map")
    storage = SlowStorage(latency_ms=IO_LATENCY_MS, bandwidth_mb_s=None)
    paths: list[Path] = [s.path for s in dataset_samples("train", 48)]
    with no_leaks("threaded_map"):
        return compare(
            lambda: sequential_reads(storage, paths),
            lambda: threaded_map(storage.read, paths, num_threads=IO_THREADS),
            rounds=5, name=f"reads, {IO_THREADS} threads", baseline_name="sequential reads",
            target=IO_TARGET, unit="files",
        )


def _batches(count: int) -> Iterator[int]:
    """A loader whose every batch takes LOAD_MS to produce (I/O and decode, emulated)."""
    for index in range(count):
        time.sleep(LOAD_MS / 1000)
        yield index


def _training(gpu: SimulatedGPU, batches: Iterator[int]) -> Iterator[int]:
    for batch in batches:
        gpu.step(batch)
        yield batch


def prefetch_overlaps_compute(ex: ModuleType) -> Comparison:
    prefetcher = require(ex, "ThreadedPrefetcher")
    gpu = SimulatedGPU(step_ms=STEP_MS)
    steps = 25
    with no_leaks("ThreadedPrefetcher"):
        return compare(
            lambda: _training(gpu, _batches(steps)),
            lambda: _training(gpu, prefetcher(_batches(steps), depth=2)),
            rounds=5, name="training steps, prefetched", baseline_name="load then step",
            target=PREFETCH_TARGET, unit="steps",
        )
