"""Planted defect: decode_less_crop works only on a Path (it reads path.suffix); the contract takes a str too."""

from solutions import ex01_profile_and_fix as solution
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401


def decode_less_crop(path):
    if path.suffix.lower() not in (".jpg", ".jpeg", ".png"):  # planted: a str has no .suffix
        raise ValueError(f"{path}: not an image file name")
    return solution.decode_less_crop(path)
