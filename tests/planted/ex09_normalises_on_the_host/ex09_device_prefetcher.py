"""Planted defect: normalises on the host in float32, then copies four times the bytes to the device."""

import torch

from solutions.ex09_device_prefetcher import DevicePrefetcher as _Honest


class DevicePrefetcher(_Honest):
    def send(self, images, labels):
        images = images.float().div_(255).sub_(self.mean.cpu()).div_(self.std.cpu())  # normalised while the device works
        return super().send(images, labels)

    def normalise(self, images):
        return images.contiguous(memory_format=torch.channels_last) if self.channels_last else images
