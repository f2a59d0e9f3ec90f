"""Planted defect: fetch_in_flight ignores in_flight and fetches one object at a time (order and bound hold)."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def fetch_in_flight(endpoint, bucket, keys, in_flight):
    client = _honest.store_client(endpoint)
    for key in keys:  # planted: one request at a time
        yield _honest.fetch_object(client, endpoint, bucket, key)
