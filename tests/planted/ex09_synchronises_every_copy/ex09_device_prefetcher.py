"""Planted defect: waits for each copy to finish before going on (stream.synchronize()): right, but nothing overlaps."""

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def send(self, images, labels):
        batch = super().send(images, labels)
        if self.stream is not None:
            self.stream.synchronize()  # the defect: make sure the copy is done
        return batch
