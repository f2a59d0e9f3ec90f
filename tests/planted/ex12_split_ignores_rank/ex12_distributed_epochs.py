"""Exercise 12, planted defect: every rank takes the first share, whatever its rank."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        if self.training:
            return super().__iter__()
        return iter(range(0, self.dataset_size, self.world_size))  # planted: rank 0's share on every rank
