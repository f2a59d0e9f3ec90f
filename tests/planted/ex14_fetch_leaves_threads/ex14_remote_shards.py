"""Planted defect: on close or error, fetch_in_flight shuts its pool down without waiting: threads with requests
still open run on after control returns."""

import concurrent.futures

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


class _NoWaitPool(concurrent.futures.ThreadPoolExecutor):
    def shutdown(self, wait=True, *, cancel_futures=False):
        super().shutdown(wait=False, cancel_futures=cancel_futures)  # planted: never joins its threads


_honest.ThreadPoolExecutor = _NoWaitPool  # fetch_in_flight looks it up in its own module
