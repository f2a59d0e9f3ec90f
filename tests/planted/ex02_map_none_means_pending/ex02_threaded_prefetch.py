"""Planted defect: workers write results into a dict and the consumer waits while its slot holds None, so a fn that returns None is waited on forever."""

import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher  # noqa: F401


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    limit = max_in_flight or 2 * num_threads
    results = {}

    def run(index, item):
        results[index] = fn(item)

    pool = ThreadPoolExecutor(num_threads)
    pending = deque()
    try:
        for index, item in enumerate(items):
            pending.append((index, pool.submit(run, index, item)))
            while len(pending) >= limit:
                yield _wait_for(results, *pending.popleft())
        while pending:
            yield _wait_for(results, *pending.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _wait_for(results, index, future):
    while results.get(index) is None:  # the defect: None is also a result
        if future.done() and future.exception():
            raise future.exception()
        time.sleep(0.001)
    return results.pop(index)
