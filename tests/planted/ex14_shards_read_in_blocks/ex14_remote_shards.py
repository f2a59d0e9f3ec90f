"""Planted defect: shard_samples reads each shard through a file object that fetches 256 KiB blocks with Range
requests as tarfile asks for them (as a block cache over a remote file does): a dozen requests per shard."""

import io

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403

BLOCK = 256 * 1024


class _Blocks(io.RawIOBase):
    def __init__(self, client, endpoint, bucket, key):
        self.client, self.endpoint, self.bucket, self.key = client, endpoint, bucket, key
        self.size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
        self.position = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.position >= self.size:
            return 0
        end = min(self.position + min(len(buffer), BLOCK), self.size)
        response = _honest.open_object(self.client, self.endpoint, self.bucket, self.key, (self.position, end))
        data = response["Body"].read()
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def shard_samples(endpoint, bucket, shard_keys, decode=None):
    client = _honest.store_client(endpoint)
    for shard in shard_keys:
        stream = io.BufferedReader(_Blocks(client, endpoint, bucket, shard), BLOCK)  # planted: a request per block
        yield from _honest.tar_samples(stream, stream.raw.size, decode, shard)
