"""Planted defect: the attempt count starts again whenever an attempt delivered bytes ("it made progress"): a body
cut every time after some bytes is asked for again and again, far past max_attempts."""

import time

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


def read_with_retries(endpoint, bucket, key, retry, byte_range, gate=None):
    transfer = _honest.Transfer(_honest.client(endpoint, retry.read_timeout_s), bucket, key, byte_range)
    where = f"GET s3://{bucket}/{key} at {endpoint.url}"
    attempt, failures = 1, 0
    while attempt <= retry.max_attempts:
        if failures:
            time.sleep(_honest.backoff_s(retry, min(attempt, failures)))
        ticket = gate.acquire() if gate is not None else 0
        slowdown, before = False, len(transfer.data)
        try:
            transfer.attempt()
            return bytes(transfer.data)
        except _honest.RetryableFailure as failure:
            slowdown, last_failure = failure.slowdown, str(failure)
            failures += 1
            attempt = 1 if len(transfer.data) > before else attempt + 1  # planted: progress refills the budget
        except _honest.StoreError as err:
            raise _honest.StoreError(f"{where}: {err}") from err.__cause__
        finally:
            if gate is not None:
                gate.release(ticket, slowdown)
    raise _honest.StoreError(f"{where}: gave up after {retry.max_attempts} attempts; the last failure: {last_failure}")


_honest.read_with_retries = read_with_retries
