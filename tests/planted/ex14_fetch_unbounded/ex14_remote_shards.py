"""Planted defect: fetch_in_flight sends every request at once (a pool of 64 threads); in_flight only bounds how
many results it keeps ahead of the consumer."""

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def fetch_in_flight(endpoint, bucket, keys, in_flight):
    client = _honest.store_client(endpoint, pool=64)
    pool = ThreadPoolExecutor(64)  # planted: not in_flight
    try:
        window = deque(pool.submit(_honest.fetch_object, client, endpoint, bucket, key) for key in keys)
        while window:
            yield window.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
