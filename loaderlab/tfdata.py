"""tf.data helpers shared by notebook 05 and exercise 07: the file list, the crop, the label, the naive
pipeline, the pipelines of notebook 05's one-technique-at-a-time ladder, and timed loads.

One definition of the dataset: the files are `loaderlab.images.list_samples(root)` (every
`IMAGE_SUFFIXES` file under `root/<class>/`, sorted by class then name), handed to tf.data as
paths. TensorFlow is imported inside the functions that need it, so `loaderlab` stays
importable where TensorFlow is not installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loaderlab.images import CROP, RESIZE, class_names, list_samples
from loaderlab.sim import GPUReport, SimulatedGPU, SlowStorage
from loaderlab.trace import Span

if TYPE_CHECKING:
    import tensorflow as tf

CLASSES_SHOWN = 20  # how many class names an unknown-folder error lists


def image_paths(root: Path | str) -> list[str]:
    """Every image file of `root/<class>/` as a string, in `list_samples` order (sorted by class, then file name).

    The same files as `list_samples` (JPEG and PNG, `IMAGE_SUFFIXES`), so a tf.data pipeline and
    the reference agree on what the dataset is; raises its clear errors for a missing root or an
    empty class folder.
    """
    return [str(sample.path) for sample in list_samples(root)]


def decode_center_crop(data: tf.Tensor) -> tf.Tensor:
    """Encoded image bytes (JPEG or PNG) -> uint8 (224, 224, 3): short side resized to 256 (bilinear, antialiased), centre crop.

    `tf.io.decode_image` tells the format by the bytes, not by the file name; on a JPEG it gives
    the same pixels as `tf.io.decode_jpeg`. The sizes and offsets follow
    `loaderlab.images.reference_crop` (Pillow); the pixels differ from it by a mean absolute
    difference of about 1 (0..255 scale). A file that does not decode raises.
    """
    import tensorflow as tf

    image = tf.io.decode_image(data, channels=3, expand_animations=False)
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
    """The int64 index of `path`'s parent folder name in `classes` (a sorted 1-D string tensor).

    A folder that is not exactly one of `classes` raises InvalidArgumentError naming it and the
    file: a silent 0 would train the model on a wrong label.
    """
    import tensorflow as tf

    folder = tf.strings.split(path, os.sep)[-2]
    matches = tf.equal(classes, folder)
    found = tf.debugging.Assert(
        tf.equal(tf.math.count_nonzero(matches), 1),
        ["folder_label: the folder", folder, "of", path, "is not one of the class folders", classes],
        summarize=CLASSES_SHOWN,
    )
    with tf.control_dependencies([found]):
        return tf.argmax(tf.cast(matches, tf.int64), output_type=tf.int64)


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


def on_one_thread(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` run by one tf.data thread, each op on one thread: what a pipeline gains there is work
    avoided or overlapped with a wait, never extra cores (graders time cache and prefetch this way)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    return dataset.with_options(options)


def naive_pipeline(root: Path | str, batch_size: int) -> tf.data.Dataset:
    """The baseline: the files of `image_paths` -> map(read, decode, crop, label) one element at a time -> batch.

    No parallel calls, no cache, no prefetch, and tf.data's automatic versions of them
    turned off: each element is read and decoded only when the consumer asks for it.
    Order: sorted, like `list_samples`.
    """
    import tensorflow as tf

    classes = tf.constant(class_names(root))

    def load(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return decode_center_crop(tf.io.read_file(path)), folder_label(path, classes)

    files = tf.data.Dataset.from_tensor_slices(image_paths(root))
    return without_automatic_optimizations(files.map(load).batch(batch_size))


# ---- notebook 05: one technique at a time --------------------------------------------------------

@dataclass(frozen=True)
class Techniques:
    """Which of notebook 05's optimizations a ladder pipeline uses (each one added alone, in a cell of its own)."""

    prefetch: bool = False       # prefetch(AUTOTUNE) last: loading overlaps the training step
    interleave: bool = False     # 8 shards of the file list read concurrently
    parallel: bool = False       # map(num_parallel_calls=AUTOTUNE): several decodes at once
    vectorised: bool = False     # the flip as one call per batch (each image its own draw), after batch()
    cache: str | None = None     # None: no cache; "": in memory; a path: to a file
    deterministic: bool = True   # False: a slow element may be overtaken


def storage_read(storage: SlowStorage) -> Callable[[tf.Tensor], tf.Tensor]:
    """A tf.data read of one path through emulated storage (tf.py_function runs Python; the sleep releases the GIL)."""
    import tensorflow as tf

    def read(path: tf.Tensor) -> tf.Tensor:
        data = tf.py_function(lambda p: storage.read(p.numpy().decode()), [path], tf.string)
        return tf.ensure_shape(data, ())

    return read


def ladder_pipeline(paths: Sequence[str], classes: tf.Tensor, read: Callable[[tf.Tensor], tf.Tensor],
                    use: Techniques, batch_size: int) -> tf.data.Dataset:
    """paths -> read -> decode, crop, label -> [cache] -> random flip -> batch -> [prefetch], with `use`'s techniques.

    tf.data's automatic rewrites are off, so each technique is seen alone. The flip is
    `tf.image.random_flip_left_right`, per image either way: on a batch it draws once per image.
    """
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    listed = tf.data.Dataset.from_tensor_slices(list(paths))
    calls = autotune if use.parallel else None
    deterministic = use.deterministic if use.parallel else None

    def read_one(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return path, read(path)

    if use.interleave:  # 8 'shards' of the file list, read concurrently
        dataset = tf.data.Dataset.range(8).interleave(lambda k: listed.shard(8, k).map(read_one), cycle_length=8,
                                                      num_parallel_calls=autotune, deterministic=use.deterministic)
    else:
        dataset = listed.map(read_one)
    dataset = dataset.map(lambda path, data: (decode_center_crop(data), folder_label(path, classes)),
                          num_parallel_calls=calls, deterministic=deterministic)
    if use.cache is not None:
        dataset = dataset.cache(use.cache)
    flip = lambda images, labels: (tf.image.random_flip_left_right(images), labels)  # noqa: E731
    if use.vectorised:
        dataset = dataset.batch(batch_size).map(flip)
    else:
        dataset = dataset.map(flip, num_parallel_calls=calls, deterministic=deterministic).batch(batch_size)
    if use.prefetch:
        dataset = dataset.prefetch(autotune)
    return without_automatic_optimizations(dataset)


def best_epoch(make: Callable[[], tf.data.Dataset], gpu: SimulatedGPU, epochs_before: int = 0,
               runs: int = 2) -> GPUReport:
    """The fastest of `runs` timed epochs, each of a new pipeline from `make`, after `epochs_before` untimed epochs
    (to fill a cache)."""
    best = None
    for _ in range(runs):
        dataset = make()
        for _ in range(epochs_before):
            for _ in dataset:
                pass
        report = gpu.train(dataset)
        best = report if best is None or report.wall_s < best.wall_s else best
    assert best is not None, "runs must be at least 1"
    return best


# ---- timelines ------------------------------------------------------------------------------------

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
