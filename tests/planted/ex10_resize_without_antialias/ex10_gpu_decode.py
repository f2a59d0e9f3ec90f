"""Exercise 10, planted defect: the resize skips antialiasing (a cheaper filter than the contract's): 1.58 levels
off on average and 4.49 at worst on the CPU, inside the GPU route's 2.0 / 6.0, outside the CPU route's 0.75 / 1.5."""

import torch
from torchvision.transforms.v2 import functional as F

from loaderlab.device import decode_jpegs
from loaderlab.images import CROP, RESIZE
from solutions.ex10_gpu_decode import *  # noqa: F403


def resize_center_crop(image):
    return F.center_crop(F.resize(image, [RESIZE], antialias=False), [CROP, CROP])  # planted: antialias=False


def decode_batch(jpegs, device, names=None):
    images = decode_jpegs(jpegs, device, names)
    if not images:
        return torch.empty((0, 3, CROP, CROP), dtype=torch.uint8, device=device)
    return torch.stack([resize_center_crop(image) for image in images])
