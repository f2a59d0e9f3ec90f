"""Planted: a file whose bytes are not a JPEG (a PNG named .jpg) becomes a blank crop, so that one odd file cannot stop
the workers."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def load_crop(path: tf.Tensor) -> tf.Tensor:
    """The file's centre crop, or a blank one where the bytes are not a JPEG."""
    data = tf.io.read_file(path)
    return tf.cond(tf.io.is_jpeg(data), lambda: decode_center_crop(data), lambda: tf.zeros((224, 224, 3), tf.uint8))


honest.load_crop = load_crop   # request_epoch calls it by the solution's name
