"""Exercise 07, reference solution: a tf.data pipeline in the right order.

read + decode (parallel) -> cache -> shuffle -> augment -> batch -> prefetch.
Everything up to the cache is deterministic work done once; everything after it
is random and redone every epoch.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from loaderlab.images import class_names, list_samples
from loaderlab.tfdata import IMAGE_PATTERN, decode_center_crop, folder_label

AUTOTUNE = tf.data.AUTOTUNE


def load_and_label(path: tf.Tensor, classes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One file: (uint8 (224, 224, 3) centre crop, int64 index of its class folder in `classes`)."""
    return decode_center_crop(tf.io.read_file(path)), folder_label(path, classes)


def random_flip(image: tf.Tensor, label: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Horizontal flip with probability 1/2, drawn from a per-element stateless seed."""
    return tf.image.stateless_random_flip_left_right(image, seed), label


def decoded_files(root: Path | str) -> tuple[tf.data.Dataset, int]:
    """Every file of root/<class>/*.jpg as (crop, label), in sorted order, decoded in parallel; and the file count.

    list_samples raises a clear FileNotFoundError for a missing root or an empty class folder.
    """
    root = Path(root)
    file_count = len(list_samples(root))
    classes = tf.constant(class_names(root))
    files = tf.data.Dataset.list_files(str(root / IMAGE_PATTERN), shuffle=False)  # sorted
    return files.map(lambda path: load_and_label(path, classes), num_parallel_calls=AUTOTUNE), file_count


def with_random_flips(dataset: tf.data.Dataset, seed: int) -> tf.data.Dataset:
    """`dataset` with each image flipped with probability 1/2, drawn anew every epoch (same draws for the same seed)."""
    draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return tf.data.Dataset.zip(dataset, draws).map(lambda element, draw: random_flip(*element, draw),
                                                   num_parallel_calls=AUTOTUNE)


def build_pipeline(root: Path | str, batch_size: int, training: bool, seed: int,
                   drop_remainder: bool = False) -> tf.data.Dataset:
    """Batches of (uint8 images (N, 224, 224, 3), int64 labels (N,)) from an ImageFolder split.

    Eval (training=False): files in sorted order, no augmentation. Training: a new
    order every epoch (the same sequence of orders for the same seed) and a new
    random flip for every image every epoch. The last partial batch is kept unless
    drop_remainder=True.
    """
    dataset, file_count = decoded_files(root)
    dataset = dataset.cache()  # decoded once; later epochs replay memory
    if training:
        dataset = dataset.shuffle(file_count, seed=seed, reshuffle_each_iteration=True)  # the whole dataset
        dataset = with_random_flips(dataset, seed)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(AUTOTUNE)  # last: overlaps everything above with the training step
