"""Planted defect: every error is skipped, a missing file (a wrong path) included."""

from pathlib import Path

from solutions.ex01_profile_and_fix import Skipped, fast_center_crop, find_bottleneck, profile_stages  # noqa: F401


def load_batches(samples, batch_size=32, skipped=None):
    import numpy as np

    images, labels = [], []
    for path, label in samples:
        try:
            images.append(fast_center_crop(path))
            labels.append(label)
        except Exception as err:
            (skipped if skipped is not None else []).append(Skipped(Path(path), str(err)))
        if len(images) == batch_size:
            yield np.stack(images), np.array(labels, dtype=np.int64)
            images, labels = [], []
    if images:
        yield np.stack(images), np.array(labels, dtype=np.int64)
