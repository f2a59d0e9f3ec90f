"""Planted defect: turns each photo upright as its EXIF orientation tag says (PIL.ImageOps.exif_transpose, as image
viewers and many scripts do), so a tagged file's crop shows other pixels than the reference's, which keeps the
pixels as stored."""

import numpy as np
from PIL import Image, ImageOps

from loaderlab.images import resize_center_crop
from solutions.ex01_profile_and_fix import Skipped, batched, decoded, find_bottleneck, profile_stages  # noqa: F401
from solutions.ex01_profile_and_fix import decode_less_crop  # noqa: F401


def upright_crop(path):
    with Image.open(path) as image:
        return np.asarray(resize_center_crop(ImageOps.exif_transpose(image).convert("RGB")))  # planted: the tag applied


def load_batches(samples, batch_size=32, skipped=None):
    yield from batched(decoded(samples, skipped, upright_crop), batch_size)
