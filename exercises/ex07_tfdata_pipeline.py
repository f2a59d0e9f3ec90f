"""Exercise 07: a tf.data pipeline in the right order of operations.

`build_pipeline(root, batch_size, training, seed)` returns a `tf.data.Dataset` of
`(images, labels)` batches read from an ImageFolder split (`root/<class>/*.jpg`).
The order of the steps is the lesson: read and decode, then cache, then shuffle,
then augment, then batch, then prefetch. Each wrong order has a symptom, and the
grader looks for each one before it times anything.
Grade: `pytest grader/test_ex07_tfdata_pipeline.py`. Hints: `make hint EX=ex07`.
"""

from __future__ import annotations

import os  # noqa: F401  (os.sep: to split a path into folders)
from pathlib import Path

import tensorflow as tf

from loaderlab.images import class_names, list_samples  # noqa: F401  (you will need these)
from loaderlab.tfdata import IMAGE_PATTERN, decode_center_crop  # noqa: F401

AUTOTUNE = tf.data.AUTOTUNE


def load_and_label(path: tf.Tensor, classes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One file: (uint8 (224, 224, 3) centre crop, int64 label).

    `classes` is a 1-D string tensor of the sorted class folder names; the label is
    the index of the file's parent folder name in it (an integer, never the name).
    """
    # TODO(ex07a): the image is decode_center_crop(tf.io.read_file(path)); the label is the
    # position of the parent folder's name (tf.strings.split(path, os.sep)[-2]) in `classes`:
    # e.g. tf.argmax(tf.cast(tf.equal(classes, folder), tf.int64), output_type=tf.int64).
    raise NotImplementedError("TODO(ex07a) in exercises/ex07_tfdata_pipeline.py: load_and_label")


def random_flip(image: tf.Tensor, label: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The training augmentation: a horizontal flip with probability 1/2, and nothing else.

    `seed` is a shape-(2,) integer tensor, different for every element and every epoch.
    """
    # TODO(ex07b): return tf.image.stateless_random_flip_left_right(image, seed), label
    raise NotImplementedError("TODO(ex07b) in exercises/ex07_tfdata_pipeline.py: random_flip")


def build_pipeline(root: Path | str, batch_size: int, training: bool, seed: int,
                   drop_remainder: bool = False) -> tf.data.Dataset:
    """Batches of `(images uint8 (N, 224, 224, 3), labels int64 (N,))` from `root/<class>/*.jpg`.

    Contract (the grader checks each point):
    - every file exactly once per epoch, labelled with the index of its class folder
      among the sorted folder names (0, 1, ...), as integers;
    - training=False: files in sorted order (as `list_samples`), no augmentation;
      pixels within a mean |difference| of 3.0 of `reference_crop`
      (`decode_center_crop` is about 1 away);
    - training=True: a different order every epoch, and the same sequence of epoch
      orders from two pipelines built with the same seed; each image flipped
      horizontally with probability 1/2, drawn anew every epoch (`random_flip`);
    - batches of `batch_size`, the last partial batch kept unless `drop_remainder`;
    - a missing folder, an empty class folder or a broken JPEG raises an error;
    - iterating the same Dataset again (the next epoch) must not decode again:
      the grader times the first epoch and a later one against a naive pipeline.
    """
    # TODO(ex07c): check the folders and count the files (list_samples does both), then
    # tf.data.Dataset.list_files(str(Path(root) / IMAGE_PATTERN), shuffle=False) (sorted), a
    # parallel map of load_and_label, and cache(), shuffle(...), the random flip, batch(...) and
    # prefetch(...) in the order the module docstring gives; shuffle and flip only when training.
    # Flip seeds: zip with tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2).
    raise NotImplementedError("TODO(ex07c) in exercises/ex07_tfdata_pipeline.py: build_pipeline")
