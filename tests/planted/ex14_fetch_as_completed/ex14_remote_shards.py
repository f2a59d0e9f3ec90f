"""Planted defect: fetch_in_flight hands each object on as its answer arrives, not in the order of the keys."""

from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def fetch_in_flight(endpoint, bucket, keys, in_flight):
    client = _honest.store_client(endpoint, pool=in_flight)
    pool = ThreadPoolExecutor(in_flight)
    todo, running = iter(keys), set()
    try:
        for key in todo:
            running.add(pool.submit(_honest.fetch_object, client, endpoint, bucket, key))
            if len(running) == in_flight:
                break
        while running:
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:  # planted: completion order
                for key in todo:
                    running.add(pool.submit(_honest.fetch_object, client, endpoint, bucket, key))
                    break
                yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
