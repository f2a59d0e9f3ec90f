"""Planted: every request joins the job named after the epoch, so the trainer's ranks and re-requests share it."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def new_job(service: str) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """The epoch's one job."""
    return tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC, service=service, job_name="epoch")


honest.new_job = new_job   # request_epoch calls it by the solution's name
