"""Planted defect: sends each batch to the device only when the caller asks for it: no copy ever runs under the caller's compute."""

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def issue_ahead(self):
        pass  # the defect: nothing is issued before the caller asks for it
