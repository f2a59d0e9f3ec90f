"""Planted defect: when its input ends the shuffle buffer sends out what it holds in the order it holds it: the last
buffer_size samples of each slot come nearly as written, and a buffer larger than the dataset shuffles nothing."""

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
    def mix(self, samples, rng):
        return shuffle_buffer(samples, self.buffer_size, rng)
