"""Planted defect: max_attempts counted as retries after the first attempt: one request more than the budget."""

import dataclasses

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403

_read = _honest.read_with_retries


def _read_one_more(endpoint, bucket, key, retry, byte_range, gate=None):
    # planted: max_attempts + 1 attempts
    return _read(endpoint, bucket, key, dataclasses.replace(retry, max_attempts=retry.max_attempts + 1), byte_range,
                 gate)


_honest.read_with_retries = _read_one_more
