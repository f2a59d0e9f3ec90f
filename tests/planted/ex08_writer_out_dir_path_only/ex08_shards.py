"""Planted defect: write_shards takes out_dir for a Path (`out_dir.mkdir(...)`), so a str, which the contract
promises too, raises AttributeError."""

from solutions.ex08_shards import ShardDataset, ShardSample, shuffle_buffer  # noqa: F401
from solutions.ex08_shards import write_shards as _honest


def write_shards(root, out_dir, target_shard_mb):
    out_dir.mkdir(parents=True, exist_ok=True)  # planted: a str has no mkdir()
    return _honest(root, out_dir, target_shard_mb)
