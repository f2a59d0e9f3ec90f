"""Exercise 02: threads. Correctness first; then two timed targets against baselines in the same run."""

import pytest

EXERCISE = "ex02_threaded_prefetch"


def test_prefetcher_yields_every_item_in_order(grade):
    """ThreadedPrefetcher yields every item once, in order, for any depth and an empty source."""
    grade()


def test_prefetcher_reads_ahead_in_background(grade):
    """It starts pulling items on its own thread as soon as it is created."""
    grade()


def test_prefetcher_is_bounded(grade):
    """It never runs more than depth (+1 in hand) items ahead of the consumer."""
    grade()


def test_prefetcher_surfaces_producer_errors(grade):
    """An exception in the source reaches the consumer: same type, message and traceback."""
    grade()


def test_prefetcher_stops_when_closed_or_dropped(grade):
    """close(), a with block, or break-and-drop stop the thread; none is left running."""
    grade()


def test_threaded_map_keeps_order(grade):
    """threaded_map yields fn(item) in input order for 1, 4 and 8 threads and any iterable."""
    grade()


def test_threaded_map_uses_its_threads(grade):
    """Up to num_threads calls of fn run at once, never more."""
    grade()


def test_threaded_map_is_bounded(grade):
    """At most max_in_flight items are pending, so an endless input is fine; closing it early stops the threads."""
    grade()


def test_threaded_map_surfaces_errors(grade):
    """An exception in fn is raised to the caller and the threads are shut down."""
    grade()


@pytest.mark.throughput
def test_io_reads_with_threads(grade):
    """Reads with 10 ms emulated latency: 8 threads must be at least 5x sequential reads."""
    grade()


@pytest.mark.throughput
def test_prefetch_overlaps_compute(grade):
    """Load 20 ms + step 20 ms: prefetching must make training at least 1.6x faster."""
    grade()
