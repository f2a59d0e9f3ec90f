"""Planted defect: calls the decoder once per image: on a GPU, a launch and a synchronisation per image, no batch parallelism."""

import torch

from solutions.ex10_gpu_decode import GpuDecode


class OneAtATime(GpuDecode):
    def decode_batch(self, jpegs, device, names=None):
        decode = super().decode_batch
        if not jpegs:
            return decode(jpegs, device, names)
        names = names or [None] * len(jpegs)  # the defect: one decoder call per image
        return torch.cat([decode([jpeg], device, None if name is None else [name]) for jpeg, name in zip(jpegs, names)])


PLANTED = OneAtATime()
read_batches, decode_batch, gpu_decode_loader = PLANTED.read_batches, PLANTED.decode_batch, PLANTED.gpu_decode_loader
