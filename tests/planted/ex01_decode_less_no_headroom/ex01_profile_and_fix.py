"""Planted defect: the solution's crop without its headroom: it decodes at 1/2, 1/4 or 1/8 wherever the crop window
keeps at least 224 pixels, right down to 224, so nothing filters what the reduced decode leaves on fine patterns. It
passed every check while they read 200 images and ci held no image at a scale's edge (issue 33)."""

from solutions import ex01_profile_and_fix as solution
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401


def decode_less_crop(path):
    original = solution.DCT_HEADROOM
    solution.DCT_HEADROOM = 1.0
    try:
        return solution.decode_less_crop(path)
    finally:
        solution.DCT_HEADROOM = original
