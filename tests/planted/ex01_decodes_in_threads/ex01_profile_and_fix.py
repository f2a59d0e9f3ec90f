"""Planted defect: decodes on a thread pool (the plain crop, no cheap wins) instead of one sequential loop."""

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from loaderlab.images import DECODE_ERRORS, decode_failure_reason, reference_crop
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, profile_stages  # noqa: F401

log = logging.getLogger(__name__)


def _crop_or_error(path):
    try:
        return reference_crop(path)
    except FileNotFoundError:
        raise
    except DECODE_ERRORS as err:
        return err


def load_batches(samples, batch_size=32, skipped=None):
    images, labels = [], []
    with ThreadPoolExecutor(max_workers=4) as pool:
        for (path, label), image in zip(samples, pool.map(_crop_or_error, [path for path, _ in samples])):
            if isinstance(image, BaseException):
                reason = decode_failure_reason(path, image)
                log.warning("skipped %s: %s", path, reason)
                if skipped is not None:
                    skipped.append(Skipped(Path(path), reason))
                continue
            images.append(image)
            labels.append(label)
            if len(images) == batch_size:
                yield np.stack(images), np.array(labels, dtype=np.int64)
                images, labels = [], []
    if images:
        yield np.stack(images), np.array(labels, dtype=np.int64)
