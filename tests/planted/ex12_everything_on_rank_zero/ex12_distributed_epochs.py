"""Exercise 12, planted defect: evaluation gives rank 0 every sample and the other ranks nothing (each sample is
still scored once, and exact_mean still matches)."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        if self.training:
            return super().__iter__()
        return iter(range(self.dataset_size) if self.rank == 0 else [])  # planted: rank 0 does all the work

    def __len__(self):
        if self.training:
            return super().__len__()
        return self.dataset_size if self.rank == 0 else 0
