"""Planted defect: the store's errors go up as botocore raised them: "NoSuchKey", never which key, bucket or server."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def open_object(client, endpoint, bucket, key, byte_range=None):
    kwargs = {"Bucket": bucket, "Key": key}
    if byte_range is not None:
        kwargs["Range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
    return client.get_object(**kwargs)  # planted: not wrapped


_honest.open_object = open_object  # every reader looks it up in the solution's module
