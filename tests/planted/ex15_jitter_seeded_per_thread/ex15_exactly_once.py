"""Planted defect: full jitter drawn from a generator per thread, each seeded alike (to make runs repeatable): every
wait is random, but calls made at once from different threads draw the same waits and retry in step."""

import random
import threading

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403

_local = threading.local()


def backoff_s(retry, n):
    if not hasattr(_local, "rng"):
        _local.rng = random.Random(71)  # planted: the same seed in every thread (71: its draws spread widely, so
        # only the in-step test sees them; with 15 the four waits before one retry spanned just a quarter of the cap)
    return _local.rng.uniform(0.0, min(retry.max_delay_s, retry.base_delay_s * 2 ** (n - 1)))


_honest.backoff_s = backoff_s
