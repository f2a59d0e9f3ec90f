"""Exercise 12, planted defect: WorkerSplitStream.set_epoch sets only this process's sampler, so workers kept across
epochs (persistent_workers=True) replay the epoch they started with."""

from solutions.ex12_distributed_epochs import TRAINING_POLICY, DistributedEpochSampler, exact_mean  # noqa: F401
from solutions.ex12_distributed_epochs import WorkerSplitStream as _Honest


class WorkerSplitStream(_Honest):
    def set_epoch(self, epoch):
        self.sampler.set_epoch(epoch)  # planted: only this process's copy; nothing shared with the workers
