"""Exercise 17, another route for steps 1 and 2: the samples as tensor slices of (keys, labels, paths); the job
registered under the legacy processing mode "distributed_epoch" (DYNAMIC's older name) with a job name of its own per
call; each rank's batch sizes from numpy.array_split, which puts the larger parts first."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from loaderlab.tfdata import decode_center_crop
from solutions.ex17_exactly_once_service import BATCH_TIMEOUT_S, exactly_once  # noqa: F401

_jobs = itertools.count()


def request_epoch(service: str, paths: Sequence[str], labels: Sequence[int], keys: Sequence[int],
                  batch_size: int) -> tf.data.Dataset:
    if len(paths) != len(labels) or len(paths) != len(keys) or batch_size <= 0:
        raise ValueError("paths, labels and keys need one entry per sample, and batch_size must be positive")
    samples = tf.data.Dataset.from_tensor_slices((np.asarray(keys, np.int64), np.asarray(labels, np.int64),
                                                  np.asarray(paths, object).astype(str)))
    crops = samples.map(lambda key, label, path: (key, label, decode_center_crop(tf.io.read_file(path))),
                        num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
    return crops.apply(tf.data.experimental.service.distribute(
        "distributed_epoch", service, job_name=f"ex17-{os.getpid()}-{next(_jobs)}"))


def rank_plan(num_samples: int, rank: int, world_size: int, batch_size: int) -> tuple[list[int], list[int]]:
    if world_size <= 0 or batch_size <= 0 or rank < 0 or rank >= world_size or num_samples < world_size:
        raise ValueError(f"rank {rank} of {world_size}, {num_samples} samples, batch size {batch_size}: no plan")
    batches = int(np.ceil(np.ceil(num_samples / world_size) / batch_size))
    if batches > num_samples // world_size:
        raise ValueError("some rank would have an empty batch")
    keys = np.arange(rank, num_samples, world_size)
    return [int(k) for k in keys], [len(part) for part in np.array_split(keys, batches)]
