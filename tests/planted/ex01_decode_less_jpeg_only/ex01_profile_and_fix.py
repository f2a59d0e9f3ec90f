"""Planted defect: reads every file as a JPEG, so a PNG raises instead of giving its crop."""

import simplejpeg

from solutions import ex01_profile_and_fix as solution
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401


def decode_less_crop(path):
    simplejpeg.decode_jpeg_header(open(path, "rb").read())  # raises ValueError on anything but a JPEG
    return solution.decode_less_crop(path)
