"""Planted defect: hands a batch over without making the caller's stream wait for the side stream's copy (a data race)."""

import torch

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def hand_over(self, batch):
        if self.stream is not None:  # the defect: no caller.wait_stream(self.stream)
            caller = torch.cuda.current_stream(self.device)
            for tensor in batch:
                tensor.record_stream(caller)
        return batch
