"""Planted defect: `skipped = skipped or []` replaces the caller's empty list with a new one, so no report reaches the caller."""

import logging
from pathlib import Path

import numpy as np

from loaderlab.images import DECODE_ERRORS, decode_failure_reason
from solutions.ex01_profile_and_fix import Skipped, fast_center_crop, find_bottleneck, profile_stages  # noqa: F401

log = logging.getLogger(__name__)


def load_batches(samples, batch_size=32, skipped=None):
    images, labels = [], []
    for path, label in samples:
        try:
            image = fast_center_crop(path)
        except FileNotFoundError:
            raise
        except DECODE_ERRORS as err:
            reason = decode_failure_reason(path, err)
            log.warning("skipped %s: %s", path, reason)
            report = skipped or []
            report.append(Skipped(Path(path), reason))
            continue
        images.append(image)
        labels.append(label)
        if len(images) == batch_size:
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
    if images:
        yield np.stack(images), np.array(labels, dtype=np.int64)
