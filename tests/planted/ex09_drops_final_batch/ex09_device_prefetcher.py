"""Planted defect: when the loader ends, the batch in hand is dropped instead of handed over (the last, partial batch is lost)."""

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def issue_ahead(self):
        super().issue_ahead()
        if self.source is None and not self.pending:  # the defect: the loader is done, and so is the batch in hand
            raise StopIteration
