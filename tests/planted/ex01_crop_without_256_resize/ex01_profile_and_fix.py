"""Planted defect: resizes the short side straight to 224 (not 256) before the centre crop."""

import numpy as np
from PIL import Image

from loaderlab.images import resize_center_crop
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, profile_stages  # noqa: F401


def load_batches(samples, batch_size=32, skipped=None):
    images, labels = [], []
    for path, label in samples:
        with Image.open(path) as image:
            images.append(np.asarray(resize_center_crop(image.convert("RGB"), resize=224), dtype=np.uint8))
        labels.append(label)
        if len(images) == batch_size:
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
    if images:
        yield np.stack(images), np.array(labels, dtype=np.int64)
