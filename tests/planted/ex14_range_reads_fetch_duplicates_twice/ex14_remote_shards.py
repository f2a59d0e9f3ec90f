"""Planted defect: ShardIndex.read fetches a key asked twice twice: neighbours merged as before, but each repeat of a
key is one more Range request for bytes already fetched."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardIndex as _Honest


class ShardIndex(_Honest):
    def read(self, keys):
        first = list(dict.fromkeys(keys))
        samples = {sample.key: sample for sample in super().read(first)}
        seen = set()
        out = []
        for key in keys:
            out.append(samples[key] if key not in seen else super().read([key])[0])  # planted: fetched again
            seen.add(key)
        return out
