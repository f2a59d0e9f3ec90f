"""Planted defect: tells a PNG from a JPEG by the file's name, so the PNG saved under a .jpg name goes to the JPEG
decoder and raises instead of giving its crop."""

from pathlib import Path

from solutions import ex01_profile_and_fix as solution
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401


def decode_less_crop(path):
    if Path(path).suffix.lower() == ".png":  # planted: the name, not the bytes, decides
        return solution.fast_center_crop(path)
    import simplejpeg

    simplejpeg.decode_jpeg_header(Path(path).read_bytes())  # what the JPEG route starts with: a PNG raises here
    return solution.decode_less_crop(path)
