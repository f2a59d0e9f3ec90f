"""Exercise 10, planted defect: read_batches cuts batches of 16 whatever batch_size it is given (the size the
examples use), so only a caller who asks for 16 gets what they asked for."""

from solutions.ex10_gpu_decode import *  # noqa: F403
from solutions.ex10_gpu_decode import read_batches as _honest


def read_batches(shard_dir, batch_size, num_workers):
    return _honest(shard_dir, 16, num_workers)  # planted: batch_size ignored
