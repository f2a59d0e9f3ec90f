"""Planted defect: always yields what is left after the loop, an empty batch when batch_size divides the count."""

import numpy as np

from solutions.ex01_profile_and_fix import Skipped, batched, decoded, find_bottleneck, profile_stages  # noqa: F401


def load_batches(samples, batch_size=32, skipped=None):
    images, labels = [], []
    for image, label in decoded(samples, skipped):
        images.append(image)
        labels.append(label)
        if len(images) == batch_size:
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
    yield np.array(images, dtype=np.uint8).reshape(-1, 224, 224, 3), np.array(labels, dtype=np.int64)  # planted
