"""Planted defect: exponential backoff without jitter: every client waits exactly the cap, so clients that fail
together retry together."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


def backoff_s(retry, n):
    return min(retry.max_delay_s, retry.base_delay_s * 2 ** (n - 1))  # planted: no random draw


_honest.backoff_s = backoff_s
