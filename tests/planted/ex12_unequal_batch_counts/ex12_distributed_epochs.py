"""Exercise 12, planted defect: training keeps the remainder, so the first ranks run one batch more than the others."""

import torch

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        if not self.training:
            return super().__iter__()
        order = torch.randperm(self.dataset_size, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        return iter(order.tolist()[self.rank::self.world_size])  # planted: the remainder kept

    def __len__(self) -> int:
        return len(range(self.rank, self.dataset_size, self.world_size))
