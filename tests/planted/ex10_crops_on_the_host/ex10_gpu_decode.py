"""Planted defect: decodes on the device, then brings each image back to the host to resize and crop it there, and
sends the crop back: two trips over the bus per image, and the host's cores doing the device's work. On a CPU every
image is on the host already, so nothing but a stand-in of CUDA shows it."""

from solutions.ex10_gpu_decode import GpuDecode


class CropsOnTheHost(GpuDecode):
    def resize_center_crop(self, image):
        return super().resize_center_crop(image.cpu()).to(image.device)  # the defect


PLANTED = CropsOnTheHost()
read_batches, resize_center_crop = PLANTED.read_batches, PLANTED.resize_center_crop
decode_batch, gpu_decode_loader = PLANTED.decode_batch, PLANTED.gpu_decode_loader
