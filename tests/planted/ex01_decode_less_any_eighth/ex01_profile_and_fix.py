"""Planted defect: asks simplejpeg for a 256 short side, so libjpeg-turbo picks any eighth (3/4, 5/8, ...), whose
scaled inverse DCTs land further from the reference than its power-of-two ones."""

import simplejpeg
import torch
from torch.nn.functional import interpolate

from loaderlab.images import CROP, RESIZE, crop_window
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401
from solutions.ex01_profile_and_fix import fast_center_crop


def decode_less_crop(path):
    data = open(path, "rb").read()
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:  # not a JPEG (the PNG under a .jpg name): the solution's full decode, as it does
        return fast_center_crop(path)
    pixels = simplejpeg.decode_jpeg(data, min_height=RESIZE if height <= width else 0,
                                    min_width=RESIZE if width < height else 0)
    left, top, right, bottom = crop_window(width, height)
    fx, fy = pixels.shape[1] / width, pixels.shape[0] / height
    window = pixels[round(top * fy):round(bottom * fy), round(left * fx):round(right * fx)]
    nchw = torch.from_numpy(window).permute(2, 0, 1)[None].contiguous(memory_format=torch.channels_last)
    return interpolate(nchw, size=(CROP, CROP), mode="bilinear", antialias=True)[0].permute(1, 2, 0).numpy()
