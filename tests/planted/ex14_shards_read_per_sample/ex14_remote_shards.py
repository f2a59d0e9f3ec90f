"""Planted defect: shard_samples reads each sample with a Range request of its own (through the index): one request,
and one latency, per sample, as the per-object loader pays."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import RemoteSample, ShardIndex


def shard_samples(endpoint, bucket, shard_keys, decode=None):
    for shard in shard_keys:
        index = ShardIndex(endpoint, bucket, shard.rsplit("/", 1)[0] + "/index.json")
        for entry in sorted((e for e in index.entries.values() if e.shard == shard), key=lambda e: e.offset):
            (sample,) = index.read([entry.key])  # planted: a request per sample
            yield RemoteSample(sample.key, sample.data if decode is None else decode(sample.data), sample.label)
