"""Planted defect: decodes and crops on the CPU, in the main process, then copies the crops to the device."""

from solutions.ex10_gpu_decode import GpuDecode


class OnTheHost(GpuDecode):
    def decode_batch(self, jpegs, device, names=None):
        return super().decode_batch(jpegs, "cpu", names).to(device)  # the defect


PLANTED = OnTheHost()
read_batches, decode_batch, gpu_decode_loader = PLANTED.read_batches, PLANTED.decode_batch, PLANTED.gpu_decode_loader
