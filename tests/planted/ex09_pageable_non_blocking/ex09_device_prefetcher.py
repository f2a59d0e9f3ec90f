"""Planted defect: copies from pageable memory with non_blocking=True, which is not asynchronous at all."""

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    @staticmethod
    def pinned(tensor):
        return tensor  # the defect: left in pageable memory
