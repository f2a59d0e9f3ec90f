"""Exercise 10, planted defect: gpu_decode_loader checks for shards with shard_dir.glob, so it works only when
shard_dir is a Path (the contract takes a str too)."""

from solutions.ex10_gpu_decode import *  # noqa: F403
from solutions.ex10_gpu_decode import gpu_decode_loader as _honest


def gpu_decode_loader(shard_dir, batch_size=64, device=None, num_workers=2):
    if not any(shard_dir.glob("*.tar")):  # planted: a str has no .glob
        raise FileNotFoundError(f"no shards in {shard_dir}")
    return _honest(shard_dir, batch_size, device, num_workers)
