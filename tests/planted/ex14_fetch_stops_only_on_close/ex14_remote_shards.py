"""Planted defect: fetch_in_flight stops its threads when the consumer closes it, but not when a GET fails: the error
goes up while the other requests' threads run on."""

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def fetch_in_flight(endpoint, bucket, keys, in_flight):
    client = _honest.store_client(endpoint, pool=in_flight)
    pool = ThreadPoolExecutor(in_flight)
    window, todo = deque(), iter(keys)
    try:
        for key in todo:
            window.append(pool.submit(_honest.fetch_object, client, endpoint, bucket, key))
            if len(window) == in_flight:
                break
        while window:
            data = window.popleft().result()
            for key in todo:
                window.append(pool.submit(_honest.fetch_object, client, endpoint, bucket, key))
                break
            yield data
    except GeneratorExit:  # planted: only a close shuts the pool down
        pool.shutdown(wait=True, cancel_futures=True)
        raise
