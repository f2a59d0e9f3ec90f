"""Planted defect: the crop window slides one 8-pixel block right of where the reference keeps it."""

import numpy as np
import simplejpeg
import torch
from torch.nn.functional import interpolate

from loaderlab.images import CROP, crop_window
from solutions.ex01_profile_and_fix import dct_scale
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401
from solutions.ex01_profile_and_fix import fast_center_crop


def decode_less_crop(path):
    data = open(path, "rb").read()
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:  # not a JPEG (the PNG under a .jpg name): the solution's full decode, as it does
        return fast_center_crop(path)
    left, top, right, bottom = crop_window(width, height)
    scale = dct_scale(right - left)
    pixels = simplejpeg.decode_jpeg(data, min_height=-(-height // scale), min_width=-(-width // scale))
    fx, fy = pixels.shape[1] / width, pixels.shape[0] / height
    left, right = round(left * fx) + 8, round(right * fx) + 8
    window = np.ascontiguousarray(pixels[round(top * fy):round(bottom * fy), left:right])
    crop = interpolate(torch.from_numpy(window).permute(2, 0, 1)[None], size=(CROP, CROP), mode="bilinear", antialias=True)
    return crop[0].permute(1, 2, 0).contiguous().numpy()
