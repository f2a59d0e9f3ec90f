"""Exercise 12, planted defect: each rank seeds its permutation with its rank too, so the ranks split different permutations and overlap."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __iter__(self):
        seed = self.seed
        self.seed = seed + 1000 * self.rank  # planted: every rank draws its own permutation
        try:
            return super().__iter__()
        finally:
            self.seed = seed
