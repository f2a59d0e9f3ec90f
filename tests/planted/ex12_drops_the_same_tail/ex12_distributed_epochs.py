"""Exercise 12, planted defect: training shuffles only the samples it keeps, so 'drop' drops the same last
dataset_size % world_size indices every epoch, and they are never trained on."""

import torch

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        if not self.training:
            return super().__iter__()
        kept = len(self) * self.world_size
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(kept, generator=generator).tolist()  # planted: the tail past `kept` is never drawn
        return iter(order[self.rank::self.world_size])
