"""Exercise 07, a correct alternative: labels from a lookup table, flips from a stateful random op.

The label is a StaticHashTable lookup whose default (-1) is checked, so an unknown folder
still fails loudly. The flip is `tf.image.random_flip_left_right` without a seed: a new
draw every epoch, though not reproducible from `seed` (the contract asks the seed to decide
the order, not the flips).
"""

from __future__ import annotations

import os
from pathlib import Path

import tensorflow as tf

from loaderlab.images import class_names
from loaderlab.tfdata import decode_center_crop, image_paths

AUTOTUNE = tf.data.AUTOTUNE


def load_and_label(path: tf.Tensor, classes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One file: (uint8 (224, 224, 3) centre crop, int64 index of its class folder; an unknown folder raises)."""
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(classes, tf.range(tf.size(classes, out_type=tf.int64))), default_value=-1)
    folder = tf.strings.split(path, os.sep)[-2]
    label = table.lookup(folder)
    checked = tf.debugging.assert_non_negative(label, message="no class folder has this name")
    with tf.control_dependencies([checked]):
        return decode_center_crop(tf.io.read_file(path)), tf.identity(label)


def random_flip(image: tf.Tensor, label: tf.Tensor, seed: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """Horizontal flip with probability 1/2 from TensorFlow's stateful generator (`seed` unused)."""
    return tf.image.random_flip_left_right(image), label


def build_pipeline(root: Path | str, batch_size: int, training: bool, seed: int,
                   drop_remainder: bool = False) -> tf.data.Dataset:
    """Batches of (uint8 images (N, 224, 224, 3), int64 labels (N,)) from an ImageFolder split."""
    paths = image_paths(root)
    classes = tf.constant(class_names(root))
    dataset = tf.data.Dataset.from_tensor_slices(paths).map(lambda path: load_and_label(path, classes),
                                                            num_parallel_calls=AUTOTUNE).cache()
    if training:
        dataset = dataset.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.map(random_flip, num_parallel_calls=AUTOTUNE)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
