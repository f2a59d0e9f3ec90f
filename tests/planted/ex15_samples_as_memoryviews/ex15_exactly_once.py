"""Planted defect: each sample's data is a memoryview into its piece's buffer (no copy), not bytes: equal to the right
bytes, but not what the contract gives (a decoder or a pickle that wants bytes fails far from here)."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def __iter__(self):
        batches = super().__iter__()
        try:
            for batch in batches:
                yield [RemoteSample(s.key, memoryview(s.data), s.label) for s in batch]  # planted: memoryview
        finally:
            batches.close()
