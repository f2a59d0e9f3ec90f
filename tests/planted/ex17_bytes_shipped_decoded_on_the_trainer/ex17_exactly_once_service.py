"""Planted: the workers send the encoded bytes; the trainer decodes after distribute (to save the network's bytes)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def load_crop(path: tf.Tensor) -> tf.Tensor:
    """The file's bytes: decoded on the trainer."""
    return tf.io.read_file(path)


def on_the_trainer(served: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """The crops made here, after the job."""
    return served.unbatch().map(lambda key, label, data: (key, label, decode_center_crop(data))).batch(batch_size)


honest.load_crop = load_crop   # request_epoch calls it by the solution's name
honest.on_the_trainer = on_the_trainer   # request_epoch calls it by the solution's name
