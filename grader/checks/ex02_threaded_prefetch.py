"""Checks for exercise 02 (threads). Storage and the accelerator step are emulated with
sleeps, so the figures depend on the technique, not on how many cores you have."""

from __future__ import annotations

import gc
import itertools
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from grader.support import dataset_samples, no_leaks, require, within
from loaderlab.baselines import sequential_reads
from loaderlab.bench import Comparison, compare
from loaderlab.sim import SimulatedGPU, SlowStorage

IO_LATENCY_MS = 10.0
IO_THREADS = 8
IO_TARGET = 5.0          # 8 threads on sleep-bound reads: about 7x measured on 2 busy cores
STEP_MS = 20.0
LOAD_MS = 20.0
PREFETCH_TARGET = 1.6    # load == step: ideal 2x, about 1.9x measured


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


# ---- ThreadedPrefetcher ----------------------------------------------------------

def prefetcher_yields_every_item_in_order(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    with no_leaks("ThreadedPrefetcher"):
        for depth in (1, 4):
            got = within(20, "list(ThreadedPrefetcher(range(1000)))", lambda: list(prefetcher(range(1000), depth=depth)))
            assert got == list(range(1000)), (
                f"with depth={depth}, got {len(got)} items; the first difference is at index "
                f"{next((i for i, (a, b) in enumerate(zip(got, range(1000))) if a != b), min(len(got), 1000))}. "
                "Every item must come out once, in the order it went in.")
        got = within(10, "an empty source", lambda: list(prefetcher(iter([]), depth=2)))
        assert got == [], f"an empty source must give no items, got {got!r}"


def prefetcher_reads_ahead_in_background(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    with no_leaks("ThreadedPrefetcher"):
        source = CountingSource(100)
        loader = prefetcher(source, depth=4)
        time.sleep(0.3)
        pulled = source.pulled
        loader.close()
    assert pulled >= 3, (
        f"0.3 s after creating ThreadedPrefetcher(depth=4), only {pulled} items had been pulled from the source. "
        "A prefetcher must start reading ahead on its own thread as soon as it is created, "
        "not when next() is called.")


def prefetcher_is_bounded(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    depth = 3
    with no_leaks("ThreadedPrefetcher"):
        source = CountingSource(200)
        loader = prefetcher(source, depth=depth)
        time.sleep(0.3)
        worst = source.pulled
        for consumed, _ in enumerate(itertools.islice(loader, 20), start=1):
            time.sleep(0.005)
            worst = max(worst, source.pulled - consumed)
        loader.close()
    assert worst <= depth + 1, (
        f"with depth={depth}, the source was up to {worst} items ahead of the consumer. At most depth "
        "items may wait in the queue, plus the one the thread is handing over: use a bounded "
        "queue.Queue(maxsize=depth), not a list and not an unbounded queue.")


def prefetcher_surfaces_producer_errors(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    with no_leaks("a prefetcher whose source failed"):
        received: list[int] = []

        def consume() -> BaseException | None:
            try:
                for item in prefetcher(CountingSource(50, fail_at=7), depth=2):
                    received.append(item)
            except ValueError as err:
                return err
            return None

        error = within(10, "consuming a source that fails", consume)
    assert error is not None, (
        f"the source raised ValueError after 7 items, but the consumer saw the stream simply end "
        f"after {len(received)} items. An exception in the producer thread must be forwarded and "
        "raised from next(), never swallowed: a silent short epoch is the worst kind of bug.")
    assert received == list(range(7)), f"the 7 items before the failure must arrive first, got {received!r}"
    assert "planted failure at item 7" in str(error), f"the original message was lost: {error!r}"
    frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    assert "_items" in frames, (
        "the exception reached you without the producer's traceback (it should show where the source "
        "failed). Re-raise the original exception object rather than creating a new one.")


def prefetcher_stops_when_closed_or_dropped(ex: ModuleType) -> None:
    prefetcher = require(ex, "ThreadedPrefetcher")
    with no_leaks("ThreadedPrefetcher.close()"):
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


# ---- threaded_map ----------------------------------------------------------------

def _slow_square(x: int) -> int:
    time.sleep(0.001 * ((x * 7) % 5))  # uneven durations: completion order differs from input order
    return x * x


def threaded_map_keeps_order(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
    with no_leaks("threaded_map"):
        for threads in (1, 4, 8):
            got = within(30, "threaded_map over 200 items", lambda: list(threaded_map(_slow_square, range(200), num_threads=threads)))
            assert got == [x * x for x in range(200)], (
                f"with num_threads={threads}, results are not fn(item) in input order "
                f"(got {len(got)} results, first ones {got[:8]}). Yield futures in submission order, "
                "not as they complete (as_completed reorders).")
        got = within(10, "threaded_map over a generator", lambda: list(threaded_map(_slow_square, (x for x in range(30)), num_threads=4)))
        assert got == [x * x for x in range(30)], "threaded_map must accept any iterable, a generator included"
        assert within(10, "an empty input", lambda: list(threaded_map(_slow_square, [], num_threads=4))) == []


def threaded_map_uses_its_threads(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
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
        within(30, "threaded_map", lambda: list(threaded_map(tracked, range(48), num_threads=6, max_in_flight=12)))
    assert 4 <= peak[0] <= 6, (
        f"with num_threads=6, at most {peak[0]} calls of fn ran at the same time; expected up to 6 "
        "(and never more). Submit several items before waiting on the first result.")


def threaded_map_is_bounded(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")
    source = CountingSource(None)
    worst = 0
    with no_leaks("threaded_map (closed early)"):
        results = threaded_map(_slow_square, source, num_threads=4, max_in_flight=8)
        for consumed, _ in enumerate(itertools.islice(results, 30), start=1):
            worst = max(worst, source.pulled - consumed)
        within(10, "closing threaded_map's generator", results.close)
    assert worst <= 8, (
        f"with max_in_flight=8 over an endless input, {worst} items were pulled but not yet yielded. "
        "Keep at most max_in_flight futures pending; the input may be endless.")


def threaded_map_surfaces_errors(ex: ModuleType) -> None:
    threaded_map = require(ex, "threaded_map")

    def fails_on_13(x: int) -> int:
        if x == 13:
            raise KeyError("planted failure on item 13")
        return x

    def consume() -> BaseException | None:
        try:
            list(threaded_map(fails_on_13, range(100), num_threads=4))
        except KeyError as err:
            return err
        return None

    with no_leaks("threaded_map after an error"):
        error = within(20, "threaded_map with a failing fn", consume)
    assert error is not None, "fn raised KeyError on item 13, but threaded_map finished without raising it"
    assert "planted failure on item 13" in str(error), f"the original message was lost: {error!r}"


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
