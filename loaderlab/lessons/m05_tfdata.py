"""Notebook 05's helpers: the pipelines of its one-technique-at-a-time ladder, the best of timed epochs, and the
timestamps that draw a tf.data timeline. The crop, the label and the naive pipeline they build on are the library's
(`loaderlab.tfdata`), shared with exercise 07."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loaderlab.sim import GPUReport, SimulatedGPU, SlowStorage
from loaderlab.tfdata import decode_center_crop, folder_label, without_automatic_optimizations
from loaderlab.trace import Span

if TYPE_CHECKING:
    import tensorflow as tf


# ---- one technique at a time ----------------------------------------------------------------------

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
