"""Planted defect: ShardDataset takes out_dir for a Path (`out_dir.glob(...)`), so a str, which the contract
promises too, raises AttributeError."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def __init__(self, out_dir, *args, **kwargs):
        if not any(out_dir.glob("shard-*.tar")):  # planted: a str has no glob()
            raise FileNotFoundError(f"no shards in {out_dir}")
        super().__init__(out_dir, *args, **kwargs)
