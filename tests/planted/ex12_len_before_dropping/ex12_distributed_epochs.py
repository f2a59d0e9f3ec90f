"""Exercise 12, planted defect: __len__ counts the remainder that __iter__ drops, so DataLoaders report a batch too many."""

import torch

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        if not self.training:
            return super().__iter__()
        order = torch.randperm(self.dataset_size, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        kept = self.dataset_size // self.world_size * self.world_size
        return iter(order.tolist()[self.rank:kept:self.world_size])

    def __len__(self) -> int:
        if self.training:
            return -(-self.dataset_size // self.world_size)  # planted: the remainder counted, though __iter__ drops it
        return super().__len__()
