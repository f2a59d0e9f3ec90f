"""Planted defect: a jittered wait that never grows: every retry waits up to base_delay_s, however many failed."""

import random

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


def backoff_s(retry, n):
    return random.uniform(0, retry.base_delay_s)  # planted: no 2^(n-1)


_honest.backoff_s = backoff_s
