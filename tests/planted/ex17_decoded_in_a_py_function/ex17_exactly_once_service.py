"""Planted: the decode in a tf.py_function (the reference crop, through Python), which runs here but not in a worker."""

from __future__ import annotations

from loaderlab.images import reference_crop

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def load_crop(path: tf.Tensor) -> tf.Tensor:
    """The reference crop, computed in Python."""
    crop = tf.py_function(lambda name: reference_crop(name.numpy().decode()), [path], tf.uint8)
    crop.set_shape((224, 224, 3))
    return crop


honest.load_crop = load_crop   # request_epoch calls it by the solution's name
