"""Planted defect: when its input ends the shuffle buffer sends out what it holds in the order it holds it: the last
buffer_size samples of each slot come nearly as written, and a buffer larger than the dataset shuffles nothing."""

import numpy as np
from torch.utils.data import get_worker_info

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, write_shards  # noqa: F401


def shuffle_buffer(items, buffer_size, rng):
    buffer = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        index = int(rng.integers(buffer_size))
        yield buffer[index]
        buffer[index] = item
    yield from buffer  # planted: not shuffled first


class ShardDataset(_Honest):
    def __iter__(self):
        info = get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        samples = (sample for shard in self.shards_for(worker_id, num_workers) for sample in self._read(shard))
        if self.shuffle:
            samples = shuffle_buffer(samples, self.buffer_size,
                                     np.random.default_rng([self.seed, self.epoch, self.rank, worker_id]))
        for sample in samples:
            yield sample if self.decode is None else sample._replace(data=self.decode(sample.data))
