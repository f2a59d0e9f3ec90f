"""Planted defect: treats the loader's exception as the end of the epoch: a silent, short epoch."""

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def on_loader_error(self, err):
        self.source = None  # the defect: a broken loader ends the epoch here
