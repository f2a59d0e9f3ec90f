"""Exercise 12, planted defect: set_epoch is accepted and ignored, so every epoch repeats epoch 0's order."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler as _Honest
from solutions.ex12_distributed_epochs import TRAINING_POLICY, WorkerSplitStream, exact_mean  # noqa: F401


class DistributedEpochSampler(_Honest):
    def set_epoch(self, epoch: int) -> None:
        pass  # planted: the epoch is ignored
