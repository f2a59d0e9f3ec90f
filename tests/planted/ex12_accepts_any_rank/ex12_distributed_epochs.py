"""Exercise 12, planted defect: the sampler accepts a rank outside [0, world_size), which then silently reads another rank's share or nothing."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def __init__(self, dataset_size: int, world_size: int, rank: int, training: bool, seed: int = 0) -> None:
        super().__init__(dataset_size, world_size, 0, training, seed)
        self.rank = rank  # planted: never checked
