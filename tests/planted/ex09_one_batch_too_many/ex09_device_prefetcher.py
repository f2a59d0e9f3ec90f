"""Exercise 09, planted defect: after handing a batch over the queue is refilled to `depth`, not depth-1: one batch
more than the contract's look-ahead is taken and held (device and pinned memory)."""

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def __next__(self):
        batch = super().__next__()
        if self.depth > 1:
            self.issue_until(self.depth)  # planted: depth batches ahead of the one handed over, not depth-1
        return batch
