"""Planted defect: object_samples skips an object whose body breaks off after every attempt ("a flaky sample"):
the epoch comes out short, without an error."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def object_samples(endpoint, bucket, objects, decode=None):
    for key, label in objects:
        try:
            yield from _honest.object_samples(endpoint, bucket, [(key, label)], decode)
        except RemoteReadError as err:
            if str(err).startswith("reading "):   # the headers came, the body broke off
                continue  # planted: the sample is left out
            raise
