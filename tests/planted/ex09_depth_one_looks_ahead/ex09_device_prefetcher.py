"""Exercise 09, planted defect: depth=1 still copies one batch ahead (the look-ahead is max(depth - 1, 1)): the
contract's depth=1 is no look-ahead."""

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def issue_until(self, count):
        super().issue_until(max(count, 1))  # planted: after the hand-over, at least one batch on its way
