"""Planted defect: flushes the last batch at the last sample's index, which never comes when that file is broken."""

import logging
from pathlib import Path

import numpy as np

from loaderlab.images import DECODE_ERRORS, decode_failure_reason
from solutions.ex01_profile_and_fix import Skipped, fast_center_crop, find_bottleneck, profile_stages  # noqa: F401

log = logging.getLogger(__name__)


def load_batches(samples, batch_size=32, skipped=None):
    images, labels = [], []
    for index, (path, label) in enumerate(samples):
        try:
            image = fast_center_crop(path)
        except FileNotFoundError:
            raise
        except DECODE_ERRORS as err:
            reason = decode_failure_reason(path, err)
            log.warning("skipped %s: %s", path, reason)
            if skipped is not None:
                skipped.append(Skipped(Path(path), reason))
            continue
        images.append(image)
        labels.append(label)
        if len(images) == batch_size or index == len(samples) - 1:
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
