"""tf.data helpers shared by notebook 05 and exercise 07: the crop, the naive pipeline, timed loads.

TensorFlow is imported inside the functions that need it, so `loaderlab` stays
importable where TensorFlow is not installed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from loaderlab.images import CROP, RESIZE, class_names
from loaderlab.trace import Span

if TYPE_CHECKING:
    import tensorflow as tf

IMAGE_PATTERN = "*/*.jpg"


def decode_center_crop(data: tf.Tensor) -> tf.Tensor:
    """JPEG bytes -> uint8 (224, 224, 3): short side resized to 256 (bilinear, antialiased), centre crop.

    The sizes and offsets follow `loaderlab.images.reference_crop` (Pillow); the
    pixels differ from it by a mean absolute difference of about 1 (0..255 scale).
    """
    import tensorflow as tf

    image = tf.io.decode_jpeg(data, channels=3)
    height, width = tf.shape(image)[0], tf.shape(image)[1]
    portrait = width <= height
    new_height = tf.where(portrait, RESIZE * height // width, RESIZE)
    new_width = tf.where(portrait, RESIZE, RESIZE * width // height)
    resized = tf.image.resize(image, (new_height, new_width), method="bilinear", antialias=True)
    top = tf.cast(tf.round(tf.cast(new_height - CROP, tf.float32) / 2), tf.int32)
    left = tf.cast(tf.round(tf.cast(new_width - CROP, tf.float32) / 2), tf.int32)
    cropped = resized[top : top + CROP, left : left + CROP]
    return tf.ensure_shape(tf.cast(tf.clip_by_value(tf.round(cropped), 0, 255), tf.uint8), (CROP, CROP, 3))


def folder_label(path: tf.Tensor, classes: tf.Tensor) -> tf.Tensor:
    """The int64 index of `path`'s parent folder name in `classes` (a sorted 1-D string tensor)."""
    import tensorflow as tf

    folder = tf.strings.split(path, os.sep)[-2]
    return tf.argmax(tf.cast(tf.equal(classes, folder), tf.int64), output_type=tf.int64)


def without_automatic_optimizations(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's default rewrites off, so that it runs exactly as written.

    By default tf.data parallelizes stateless maps (map_parallelization), adds a final
    prefetch (inject_prefetch) and fuses map + batch into one op that works in a
    background thread (map_and_batch_fusion): a "naive" pipeline is only naive with
    those turned off.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    options.experimental_optimization.map_parallelization = False
    options.experimental_optimization.map_and_batch_fusion = False
    options.experimental_optimization.inject_prefetch = False
    return dataset.with_options(options)


def naive_pipeline(root: Path | str, batch_size: int) -> tf.data.Dataset:
    """The baseline: list_files -> map(read, decode, crop, label) one element at a time -> batch.

    No parallel calls, no cache, no prefetch, and tf.data's automatic versions of them
    turned off: each element is read and decoded only when the consumer asks for it.
    Order: sorted, like `list_samples`.
    """
    import tensorflow as tf

    classes = tf.constant(class_names(root))

    def load(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return decode_center_crop(tf.io.read_file(path)), folder_label(path, classes)

    files = tf.data.Dataset.list_files(str(Path(root) / IMAGE_PATTERN), shuffle=False)
    return without_automatic_optimizations(files.map(load).batch(batch_size))


def stamped_load(path: tf.Tensor, classes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Like the naive load, plus the wall-clock times (tf.timestamp) at which reading began, ended and decoding ended."""
    import tensorflow as tf

    started = tf.timestamp()
    with tf.control_dependencies([started]):
        data = tf.io.read_file(path)
    with tf.control_dependencies([data]):
        read = tf.timestamp()
    with tf.control_dependencies([read]):
        image = decode_center_crop(data)
    with tf.control_dependencies([image]):
        decoded = tf.timestamp()
    return image, folder_label(path, classes), tf.stack([started, read, decoded])


def spans_from_stamps(stamps: list[tuple[float, float, float]], clock_offset: float) -> list[Span]:
    """'read' and 'decode' spans from `stamped_load` times, on `time.perf_counter`'s clock.

    tf.data does not say which of its threads ran an element, so spans are packed
    into lanes by overlap ("tf.data slot 1", "slot 2", ...): the number of lanes is
    how many loads were running at once. `clock_offset` is time.time() - time.perf_counter().
    """
    spans: list[Span] = []
    lane_free_at: list[float] = []
    for started, read, decoded in sorted(stamps):
        start, middle, end = started - clock_offset, read - clock_offset, decoded - clock_offset
        slot = next((i for i, free in enumerate(lane_free_at) if free <= start), len(lane_free_at))
        if slot == len(lane_free_at):
            lane_free_at.append(end)
        lane_free_at[slot] = end
        lane = f"tf.data slot {slot + 1}"
        spans += [Span("read", lane, start, middle), Span("decode", lane, middle, end)]
    return spans
