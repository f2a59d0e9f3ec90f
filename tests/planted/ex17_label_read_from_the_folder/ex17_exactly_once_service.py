"""Planted: the label read from the file's class folder (as exercise 07's pipeline does), not the one given."""

from __future__ import annotations

from loaderlab.images import class_names
from loaderlab.paths import dataset_dir

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def samples(paths: Sequence[str], labels: Sequence[int], keys: Sequence[int]) -> tf.data.Dataset:
    """(key, the folder's class number, path) per sample."""
    classes = tf.constant(class_names(dataset_dir() / "train"))

    def from_folder(key: tf.Tensor, path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        folder = tf.strings.split(path, "/")[-2]
        return key, tf.argmax(tf.cast(tf.equal(classes, folder), tf.int64), output_type=tf.int64), path

    return tf.data.Dataset.from_tensor_slices((tf.constant(list(keys), tf.int64),
                                               tf.constant(list(paths), tf.string))).map(from_folder)


honest.samples = samples   # request_epoch calls it by the solution's name
