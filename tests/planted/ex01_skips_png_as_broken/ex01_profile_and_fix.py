"""Planted defect: reads every file's JPEG header first (simplejpeg), so the PNG saved under a .jpg name raises a
ValueError, which the loader takes for a broken file: a readable image skipped and reported as bad."""

import simplejpeg

from solutions.ex01_profile_and_fix import Skipped, batched, decoded, fast_center_crop, find_bottleneck, profile_stages  # noqa: F401
from solutions.ex01_profile_and_fix import decode_less_crop  # noqa: F401


def jpeg_crop(path):
    with open(path, "rb") as handle:
        simplejpeg.decode_jpeg_header(handle.read())  # planted: ValueError for anything but a JPEG, a PNG included
    return fast_center_crop(path)


def load_batches(samples, batch_size=32, skipped=None):
    yield from batched(decoded(samples, skipped, jpeg_crop), batch_size)
