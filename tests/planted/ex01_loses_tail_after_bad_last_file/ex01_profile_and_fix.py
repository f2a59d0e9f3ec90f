"""Planted defect: flushes the last batch at the last sample's index, which never comes when that file is broken."""

import numpy as np

from solutions.ex01_profile_and_fix import Skipped, batched, decoded, find_bottleneck, profile_stages  # noqa: F401


def load_batches(samples, batch_size=32, skipped=None):
    images, labels = [], []
    numbered = [(path, (index, label)) for index, (path, label) in enumerate(samples)]
    for image, (index, label) in decoded(numbered, skipped):
        images.append(image)
        labels.append(label)
        if len(images) == batch_size or index == len(samples) - 1:  # planted: the last index may be a broken file
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
