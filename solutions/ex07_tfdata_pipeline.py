"""Exercise 07, reference solution: a tf.data pipeline in the right order.

read + decode (parallel) -> cache -> shuffle -> augment -> batch -> prefetch.
Everything up to the cache is deterministic work done once; everything after it
is random and redone every epoch. (The flip may also come after batch, one call per
batch with a draw per image: tests/alternatives/ex07_flips_batches does that.)
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from loaderlab.images import class_names
from loaderlab.tfdata import decode_center_crop, folder_label, image_paths

AUTOTUNE = tf.data.AUTOTUNE


def load_and_label(path: tf.Tensor, classes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One file: (uint8 (224, 224, 3) centre crop, int64 index of its class folder in `classes`; raises for another folder)."""
    return decode_center_crop(tf.io.read_file(path)), folder_label(path, classes)


def random_flip(image: tf.Tensor, label: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Horizontal flip with probability 1/2, drawn from a stateless seed (on a batch, one draw per image)."""
    return tf.image.stateless_random_flip_left_right(image, seed), label


def decoded_files(root: Path | str) -> tuple[tf.data.Dataset, int]:
    """Every file of list_samples(root) as (crop, label), in its order, decoded in parallel; and the file count.

    image_paths (list_samples) raises a clear FileNotFoundError for a missing root or an empty class folder.
    """
    paths = image_paths(root)
    classes = tf.constant(class_names(root))
    files = tf.data.Dataset.from_tensor_slices(paths)
    return files.map(lambda path: load_and_label(path, classes), num_parallel_calls=AUTOTUNE), len(paths)


def with_random_flips(dataset: tf.data.Dataset, seed: int) -> tf.data.Dataset:
    """`dataset` with each image flipped with probability 1/2, drawn anew every epoch (same draws for the same seed)."""
    draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return tf.data.Dataset.zip(dataset, draws).map(lambda element, draw: random_flip(*element, draw),
                                                   num_parallel_calls=AUTOTUNE)


def build_pipeline(root: Path | str, batch_size: int, training: bool, seed: int,
                   drop_remainder: bool = False) -> tf.data.Dataset:
    """Batches of (uint8 images (N, 224, 224, 3), int64 labels (N,)) from an ImageFolder split.

    Eval (training=False): files in list_samples order, no augmentation. Training: a new
    order every epoch, a shuffle of all the samples (the same sequence of orders for the
    same seed), and a new random flip for every image every epoch. The last partial batch
    is kept unless drop_remainder=True.
    """
    dataset, file_count = decoded_files(root)
    dataset = dataset.cache()  # decoded once; later epochs replay memory
    if training:
        dataset = dataset.shuffle(file_count, seed=seed, reshuffle_each_iteration=True)  # every sample, not batches
        dataset = with_random_flips(dataset, seed)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(AUTOTUNE)  # last: overlaps everything above with the training step
