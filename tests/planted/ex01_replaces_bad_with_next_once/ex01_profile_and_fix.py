"""Planted defect: a broken file is reported and replaced by the next file, which is not checked in turn."""

from loaderlab.images import DECODE_ERRORS, decode_failure_reason
from solutions.ex01_profile_and_fix import fast_center_crop, report_skip
from solutions.ex01_profile_and_fix import Skipped, batched, decoded, find_bottleneck, profile_stages  # noqa: F401


def _decoded(samples, skipped):
    remaining = iter(samples)
    for path, label in remaining:
        try:
            image = fast_center_crop(path)
        except FileNotFoundError:
            raise
        except DECODE_ERRORS as err:
            report_skip(path, decode_failure_reason(path, err), skipped)
            path, label = next(remaining)  # planted: take the next file in its place, unchecked
            image = fast_center_crop(path)
        yield image, label


def load_batches(samples, batch_size=32, skipped=None):
    yield from batched(_decoded(samples, skipped), batch_size)
