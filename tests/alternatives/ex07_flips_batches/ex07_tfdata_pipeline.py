"""Exercise 07, a correct alternative: the random flip runs on whole batches, after batch().

read + decode (parallel) -> cache -> shuffle -> batch -> flip (one call per batch) -> prefetch.
`tf.image.stateless_random_flip_left_right` on a 4-D batch draws once per image, so each
image is still flipped on its own with probability 1/2; the seeds come from a stream that
is drawn anew every epoch. Notebook 05 measures what this vectorised flip costs or saves.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from loaderlab.images import class_names
from loaderlab.tfdata import decode_center_crop, folder_label, image_paths

AUTOTUNE = tf.data.AUTOTUNE


def load_and_label(path: tf.Tensor, classes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One file: (uint8 (224, 224, 3) centre crop, int64 index of its class folder in `classes`)."""
    return decode_center_crop(tf.io.read_file(path)), folder_label(path, classes)


def random_flip(image: tf.Tensor, label: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Horizontal flip with probability 1/2 from a stateless seed; on a batch, one draw per image."""
    return tf.image.stateless_random_flip_left_right(image, seed), label


def build_pipeline(root: Path | str, batch_size: int, training: bool, seed: int,
                   drop_remainder: bool = False) -> tf.data.Dataset:
    """Batches of (uint8 images (N, 224, 224, 3), int64 labels (N,)); training batches flipped per image, per batch call."""
    paths = image_paths(root)
    classes = tf.constant(class_names(root))
    dataset = tf.data.Dataset.from_tensor_slices(paths).map(lambda path: load_and_label(path, classes),
                                                            num_parallel_calls=AUTOTUNE).cache()
    if training:
        dataset = dataset.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if training:
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
        dataset = tf.data.Dataset.zip(dataset, seeds).map(lambda batch, draw: random_flip(*batch, draw),
                                                          num_parallel_calls=AUTOTUNE)
    return dataset.prefetch(AUTOTUNE)
