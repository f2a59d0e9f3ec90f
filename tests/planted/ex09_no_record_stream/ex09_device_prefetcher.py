"""Planted defect: never records the caller's stream on the tensors it hands over, and lets the side stream run ahead of the caller's (it waits for it once, at the start): a dropped batch's memory is reused by the next copy while the caller's kernels still read it."""

import torch

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.stream is not None:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))  # mean and std are ready

    def side_stream_waits_for_caller(self):
        pass  # the defect: only once, at the start

    def hand_over(self, batch):
        if self.stream is not None:  # the defect: no record_stream(caller)
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        return batch
