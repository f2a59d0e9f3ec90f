"""Planted defect: the shuffle buffer never sends out what it still holds when its input ends: each slot loses up to
buffer_size samples per epoch (all of them when the buffer is larger than its share)."""

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
    # planted: what the buffer holds at the end is never yielded


class ShardDataset(_Honest):
    def mix(self, samples, rng):
        return shuffle_buffer(samples, self.buffer_size, rng)
