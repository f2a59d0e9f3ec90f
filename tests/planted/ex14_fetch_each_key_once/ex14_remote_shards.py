"""Planted defect: fetch_in_flight drops the keys given twice (why fetch an object again?): a key given twice comes
once, and every item after it is out of place."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def fetch_in_flight(endpoint, bucket, keys, in_flight):
    yield from _honest.fetch_in_flight(endpoint, bucket, list(dict.fromkeys(keys)), in_flight)  # planted
