"""Exercise 12, planted defect: evaluation gives rank 0 every sample and the other ranks nothing: each sample is
scored once, but one rank does all the work while the others wait."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        if not self.training:
            return iter(range(self.dataset_size) if self.rank == 0 else [])  # planted: no split at all
        return super().__iter__()

    def __len__(self):
        if not self.training:
            return self.dataset_size if self.rank == 0 else 0
        return super().__len__()
