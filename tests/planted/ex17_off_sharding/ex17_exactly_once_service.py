"""Planted: ShardingPolicy.OFF, each worker serving the whole dataset (more throughput, duplicates left to exactly_once)."""

from __future__ import annotations

import tensorflow as tf

from loaderlab.tfdata import decode_center_crop
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def request_epoch(service: str, paths: Sequence[str], labels: Sequence[int], keys: Sequence[int],
                  batch_size: int) -> tf.data.Dataset:
    """A new job of the service over these samples, read, decoded, cropped and batched in its workers."""
    if not len(paths) == len(labels) == len(keys):
        raise ValueError(f"paths, labels and keys must have one entry per sample: got {len(paths)} paths, "
                         f"{len(labels)} labels and {len(keys)} keys")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    files = tf.constant(list(paths), tf.string)
    classes = tf.constant(list(labels), tf.int64)
    names = tf.constant(list(keys), tf.int64)

    def load(i: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        return tf.gather(names, i), tf.gather(classes, i), decode_center_crop(tf.io.read_file(tf.gather(files, i)))

    work = tf.data.Dataset.range(len(paths)).map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
    served = work.apply(tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.OFF, service=service))
    return served.prefetch(2)
