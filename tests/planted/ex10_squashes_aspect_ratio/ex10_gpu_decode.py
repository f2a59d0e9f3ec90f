"""Planted defect: resizes every image to 256 x 256 before the centre crop, squashing its aspect ratio."""

from torchvision.transforms.v2 import functional as F

from loaderlab.images import CROP, RESIZE
from solutions.ex10_gpu_decode import GpuDecode


class Squashes(GpuDecode):
    def resize_center_crop(self, image):
        return F.center_crop(F.resize(image, [RESIZE, RESIZE], antialias=True), [CROP, CROP])  # the defect


PLANTED = Squashes()
read_batches, decode_batch, gpu_decode_loader = PLANTED.read_batches, PLANTED.decode_batch, PLANTED.gpu_decode_loader
