"""Planted defect: "equal jitter" (half the cap, plus a random half): waits that never fall below half the cap, which
the contract's full jitter does half the time."""

import random

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


def backoff_s(retry, n):
    cap = min(retry.max_delay_s, retry.base_delay_s * 2 ** (n - 1))
    return cap / 2 + random.uniform(0, cap / 2)  # planted: at least half the cap


_honest.backoff_s = backoff_s
