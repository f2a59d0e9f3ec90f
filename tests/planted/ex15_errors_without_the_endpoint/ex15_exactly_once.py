"""Planted defect: the error names the bucket and the key but not the endpoint: which server refused?"""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403

_read = _honest.read_with_retries


def _read_unplaced(endpoint, bucket, key, retry, byte_range, gate=None):
    try:
        return _read(endpoint, bucket, key, retry, byte_range, gate)
    except StoreError as err:  # planted: the endpoint's URL is cut out of the message
        raise StoreError(str(err).replace(endpoint.url, "the store")) from None


_honest.read_with_retries = _read_unplaced
