"""Planted defect: the client's read timeout left at botocore's default (60 s): a body that stalls without closing
holds its reader until the server gives up on it (here the proxy closes it after a few seconds; S3 may never)."""

import functools

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


@functools.lru_cache(maxsize=8)
def client(endpoint, read_timeout_s):
    return endpoint.client(retries={"total_max_attempts": 1, "mode": "standard"},  # planted: no read_timeout
                           connect_timeout=_honest.CONNECT_TIMEOUT_S, max_pool_connections=_honest.POOL_CONNECTIONS)


_honest.client = client
