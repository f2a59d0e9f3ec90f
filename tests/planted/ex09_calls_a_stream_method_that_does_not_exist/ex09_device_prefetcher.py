"""Exercise 09, planted defect: the CUDA branch's hand-over calls `wait_for`, which torch.cuda.Stream does not have
(its method is wait_stream). On a machine without CUDA that branch never runs, so every CPU check passes it; on a GPU
it raises AttributeError at the first batch."""

import torch

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def hand_over(self, batch):
        if self.stream is not None:
            caller = torch.cuda.current_stream(self.device)
            caller.wait_for(self.stream)  # planted: no such method
            for tensor in batch:
                tensor.record_stream(caller)
        return batch
