"""Planted: ShardingPolicy.OFF, each worker serving the whole dataset (more throughput, duplicates left to
exactly_once)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def new_job(service: str) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """Every worker the whole dataset."""
    return tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.OFF, service=service)


honest.new_job = new_job   # request_epoch calls it by the solution's name
