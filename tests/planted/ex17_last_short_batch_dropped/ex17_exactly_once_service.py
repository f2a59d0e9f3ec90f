"""Planted: batches with drop_remainder=True, so that every batch the trainer gets is full."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def batched(dataset: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """Full batches only."""
    return dataset.batch(batch_size, drop_remainder=True)


honest.batched = batched   # request_epoch calls it by the solution's name
