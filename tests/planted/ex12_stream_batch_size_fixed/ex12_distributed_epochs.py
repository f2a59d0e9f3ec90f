"""Exercise 12, planted defect: WorkerSplitStream deals out batches of 3 to the workers whatever batch_size it was
given, so the workers' turns match the DataLoader's batches only when the loader's batch size is 3."""

from solutions.ex12_distributed_epochs import DistributedEpochSampler, TRAINING_POLICY, exact_mean  # noqa: F401
from solutions.ex12_distributed_epochs import WorkerSplitStream as _Honest


class WorkerSplitStream(_Honest):
    def __init__(self, sampler, batch_size):
        super().__init__(sampler, 3)  # planted: batch_size ignored
