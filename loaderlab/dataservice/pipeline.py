"""The epoch as tf.data, decoded where the caller says: on this process, or in tf.data service's workers.

`served_epoch(paths, labels, keys, ...)` is what `loaderlab.dataservice.trainer` reads and what the league's service
entry times: batches of (keys, labels, uint8 (N, 224, 224, 3) crops), the crops made by the course's
`loaderlab.tfdata.decode_center_crop` (within one level of `loaderlab.images.reference_crop`).
`multiscale_rounds(...)` is the endless stream the trainer's coordinated-reads epochs register: the same crops,
resized round by round. The part that runs in the workers is TensorFlow ops alone: a `tf.py_function` there fails
("Could not find callback with key=pyfunc_0 in the registry", measured), since a worker runs the registered graph,
not this process's Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import tensorflow as tf

from loaderlab.tfdata import decode_center_crop

DecodeIn = Literal["workers", "trainer"]


def served_epoch(paths: Sequence[str], labels: Sequence[int], keys: Sequence[int] | Sequence[str], batch_size: int,
                 *, service: str | None, policy: str = "DYNAMIC", decode_in: DecodeIn = "workers",
                 compression: str | None = None) -> tf.data.Dataset:
    """Sample i is (keys[i], labels[i], the file paths[i]). With `service` None, this process reads and decodes (a
    parallel map); otherwise the dataset is registered with the dispatcher at `service` ("grpc://host:port") under
    ShardingPolicy `policy`, and the workers read, batch, and with `decode_in="workers"` decode; with
    `decode_in="trainer"` they send the encoded bytes and this process decodes. `compression` is `distribute`'s."""
    read = _read(paths, labels, keys)
    if service is None:
        return read.map(_decode, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size).prefetch(2)
    if decode_in == "workers":
        read = read.map(_decode, num_parallel_calls=tf.data.AUTOTUNE)
    served = read.batch(batch_size).apply(tf.data.experimental.service.distribute(
        processing_mode=getattr(tf.data.experimental.service.ShardingPolicy, policy), service=service,
        compression=compression))
    if decode_in == "trainer":
        served = served.unbatch().map(_decode, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
    return served.prefetch(2)


def multiscale_rounds(paths: Sequence[str], labels: Sequence[int], keys: Sequence[int], batch_size: int,
                      sides: Sequence[int], consumers: int) -> tf.data.Dataset:
    """An endless stream (coordinated reads need one: `distribute`'s documentation) of full batches of (keys, labels,
    uint8 crops), the samples over and over, in rounds of `consumers` consecutive batches resized to one side drawn at
    random from `sides` for each round, as multi-scale training feeds a detection model. The draws are not seeded:
    each worker that runs the stream draws its own. Read by `consumers` ranks in strict round-robin, every rank of a
    step gets a batch of one round."""
    table = tf.constant(list(sides), tf.int32)
    draws = tf.data.Dataset.random().map(lambda draw: tf.gather(table, tf.cast(draw % len(sides), tf.int32)))
    round_sides = draws.flat_map(lambda side: tf.data.Dataset.from_tensors(side).repeat(consumers))
    batches = (_read(paths, labels, keys).map(_decode, num_parallel_calls=tf.data.AUTOTUNE)
               .batch(batch_size, drop_remainder=True).repeat())

    def resize(batch: tuple[tf.Tensor, tf.Tensor, tf.Tensor], side: tf.Tensor) -> tuple[tf.Tensor, ...]:
        names, classes, images = batch
        return names, classes, tf.cast(tf.image.resize(images, tf.stack([side, side])), tf.uint8)

    return tf.data.Dataset.zip((batches, round_sides)).map(resize)


def _read(paths: Sequence[str], labels: Sequence[int], keys: Sequence[int] | Sequence[str]) -> tf.data.Dataset:
    """Sample i as (keys[i], labels[i], the bytes of the file paths[i])."""
    files, classes, names = tf.constant(list(paths)), tf.constant(list(labels), tf.int64), tf.constant(list(keys))
    return tf.data.Dataset.range(len(paths)).map(
        lambda i: (tf.gather(names, i), tf.gather(classes, i), tf.io.read_file(tf.gather(files, i))))


def _decode(key: tf.Tensor, label: tf.Tensor, data: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    return key, label, decode_center_crop(data)
