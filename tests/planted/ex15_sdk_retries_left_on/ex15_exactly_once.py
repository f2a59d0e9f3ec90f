"""Planted defect: boto3's own retries left on (standard mode, 3 attempts): each of read_object's attempts is up to
three requests, and the budget max_attempts means nothing."""

import functools

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


@functools.lru_cache(maxsize=8)
def client(endpoint, read_timeout_s):
    return endpoint.client(retries={"mode": "standard"},  # planted: the SDK retries a 503 itself
                           connect_timeout=_honest.CONNECT_TIMEOUT_S, read_timeout=read_timeout_s,
                           max_pool_connections=_honest.POOL_CONNECTIONS)


_honest.client = client
