"""Exercise 07: a tf.data pipeline in the right order of operations.

`build_pipeline(root, batch_size, training, seed)` returns a `tf.data.Dataset` of
`(images, labels)` batches read from an ImageFolder split (`root/<class>/<image files>`).
The order of the steps is the lesson (notebook 05): read and decode, then cache, then
shuffle, then the random flip, then batch, then prefetch; the flip may also come right
after batch, as one call per batch, as long as every image gets its own draw. Each wrong
order has a symptom, and the grader looks for each one before it times anything.

You build it in graded steps; the grade summary shows each step's status, so you can
stop after any step with something that passes:
  1. read, decode and label one file (`load_and_label`);
  2. every file in order, cached and batched (`build_pipeline`, training=False);
  3. training: a new, seeded shuffle of every sample each epoch;
  4. training: a random flip per image, drawn anew each epoch (`random_flip`);
  5. bad input is reported (nothing to add if you let errors through);
  6. speed: the grader times a first epoch and a cached one.
Files: Every kind of file the dataset mixes (`data_gen.encodings`: progressive, 4:2:2 and
4:4:4, grayscale, Adobe CMYK and YCCK, EXIF-tagged camera files, a PNG under a .jpg name)
gives the reference's pixels (`loaderlab.images`: read by its content, kept as stored with no
EXIF rotation, grayscale as three equal channels, CMYK as Pillow converts it).
Grade: `pytest grader/test_ex07_tfdata_pipeline.py`. Hints: `make hint EX=ex07`.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from loaderlab.images import class_names  # noqa: F401  (you will need these)
from loaderlab.tfdata import decode_center_crop, image_paths  # noqa: F401

AUTOTUNE = tf.data.AUTOTUNE


def load_and_label(path: tf.Tensor, classes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One file: (uint8 (224, 224, 3) centre crop, int64 label, a scalar).

    `path` is a string tensor; `classes` is a 1-D string tensor of the sorted class folder
    names. The label is the index of the file's parent folder name in `classes`. A file whose
    folder is not one of `classes` must raise an error (tf.errors.InvalidArgumentError, for
    instance): a silent label 0 would train the model on a wrong answer and nobody would know.
    """
    # TODO(ex07, step 1): read the file's bytes and decode them into the course's centre crop
    # (`decode_center_crop` does the decode, resize and crop the grader compares with). Then find
    # the label: the position of the parent folder's name among `classes`, as an int64 tensor, and
    # fail loudly when the name is not there. This runs inside tf.data, on tensors: use tf ops.
    raise NotImplementedError("TODO(ex07, step 1) in exercises/ex07_tfdata_pipeline.py: load_and_label")


def random_flip(image: tf.Tensor, label: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The training augmentation: a horizontal flip with probability 1/2, and nothing else.

    `image` is one image (224, 224, 3) or a batch (N, 224, 224, 3): on a batch, each image gets
    its own draw (never the whole batch flipped together). `seed` is a shape-(2,) integer tensor
    that build_pipeline makes different for every element (or batch) and every epoch.
    """
    # TODO(ex07, step 4): flip with probability 1/2, decided by `seed` alone, so that the same seed
    # gives the same flip and a new seed a new draw. TensorFlow's image ops have a stateless flip.
    # Then call random_flip from build_pipeline when training, after the shuffle, with a new seed
    # for every element each epoch (tf.data can make a stream of random numbers for that).
    raise NotImplementedError("TODO(ex07, step 4) in exercises/ex07_tfdata_pipeline.py: random_flip")


def build_pipeline(root: Path | str, batch_size: int, training: bool, seed: int,
                   drop_remainder: bool = False) -> tf.data.Dataset:
    """Batches of `(images uint8 (N, 224, 224, 3), labels int64 (N,))` from `root/<class>/<image files>`.

    Contract (the grader checks each point; the step that checks it is in brackets):
    - [1] `load_and_label` as its docstring says;
    - [2] the files are those of `list_samples(root)` (`image_paths(root)` lists them), every file
      exactly once per epoch, labelled with the index of its class folder among the sorted folder
      names (0, 1, ...) as int64;
    - [2] training=False: files in `list_samples` order, no augmentation; pixels within a mean
      |difference| of 3.0 of `reference_crop` (`decode_center_crop` is about 0.2 away; TensorFlow's
      default JPEG decode alone, its fast IDCT, puts a crop about 1 away: notebook 05);
    - [2] batches of `batch_size` (any size from 1, also more than the file count), the last
      partial batch kept; with `drop_remainder=True` only full batches, so the batch dimension
      is static (element_spec shape (batch_size, 224, 224, 3)); `root` may be a str or a Path;
    - [2] iterating the same Dataset again (the next epoch) neither reads nor decodes a file:
      later epochs replay a cache of the decoded crops;
    - [3] training=True: each epoch a new order, a shuffle of all the samples (not of whole
      batches, not within a small window): any file may land anywhere. Two pipelines built with
      the same seed give the same sequence of epoch orders; another seed gives other orders;
    - [4] training=True: each image flipped horizontally with probability 1/2, on its own (not a
      whole batch together), drawn anew every epoch (not the same flips, nor the same pattern of
      flips by position, each epoch); the seed may decide the flips too, but need not;
    - [5] a missing folder or an empty class folder raises an error naming the folder; a file
      that does not decode (truncated, empty, not an image) raises an error, at build time or
      while iterating: never skipped silently;
    - [6] speed, timed on one tf.data thread (so the gain is the technique, not your cores): a
      first epoch overlaps loading with an emulated training step (at least 1.25x the naive
      pipeline), and a later epoch replays the cache (at least 3x the naive pipeline).
    """
    # TODO(ex07, step 2): the pipeline for training=False. Start from the files `image_paths`
    # lists (in order), turn each into (crop, label) with load_and_label, several at once. Cache
    # the decoded elements, so that later epochs skip reading and decoding; then batch (keeping
    # the last partial batch unless asked to drop it) and prefetch last, so that loading runs
    # while the model trains. Check the folders before anything runs: `image_paths` raises a
    # clear error for a missing folder or an empty class.
    # TODO(ex07, step 3): when training, shuffle every sample after the cache (before it, the cache
    # would record one order and replay it), with a buffer that holds the whole dataset, a new
    # order each epoch, and `seed` deciding the sequence of orders. Remove the raise below.
    # Step 4 (the flip) is random_flip's, above.
    if training:
        raise NotImplementedError(
            "TODO(ex07, step 3) in exercises/ex07_tfdata_pipeline.py: build_pipeline(training=True), after step 2")
    raise NotImplementedError("TODO(ex07, step 2) in exercises/ex07_tfdata_pipeline.py: build_pipeline")
