"""Exercise 12, planted defect: each worker takes every n-th sample rather than every n-th batch: all samples come out, in another order."""

from torch.utils.data import get_worker_info

from solutions.ex12_distributed_epochs import TRAINING_POLICY, DistributedEpochSampler, exact_mean  # noqa: F401
from solutions.ex12_distributed_epochs import WorkerSplitStream as _Honest


class WorkerSplitStream(_Honest):
    def __iter__(self):
        worker = get_worker_info()
        worker_id, workers = (0, 1) if worker is None else (worker.id, worker.num_workers)
        yield from list(self.sampler)[worker_id::workers]  # planted: samples, not batches
