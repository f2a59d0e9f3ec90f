"""Planted defect: decodes every JPEG at 1/2, so a small image's window falls below 224 pixels and is scaled up."""

from solutions import ex01_profile_and_fix as solution
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401


def decode_less_crop(path):
    original = solution.dct_scale
    solution.dct_scale = lambda window_side: 2
    try:
        return solution.decode_less_crop(path)
    finally:
        solution.dct_scale = original
