"""Planted defect: max_delay_s ignored: the waits double without a ceiling."""

import random

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


def backoff_s(retry, n):
    return random.uniform(0, retry.base_delay_s * 2 ** (n - 1))  # planted: not capped at max_delay_s


_honest.backoff_s = backoff_s
