"""Exercise 12, planted defect: evaluation pads like DistributedSampler (repeats the first indices until every rank has as many), and the repeats are scored."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        if self.training:
            return super().__iter__()
        per_rank = -(-self.dataset_size // self.world_size)
        padded = list(range(self.dataset_size))
        padded += padded[:per_rank * self.world_size - len(padded)]  # planted: padding in evaluation
        return iter(padded[self.rank::self.world_size])
