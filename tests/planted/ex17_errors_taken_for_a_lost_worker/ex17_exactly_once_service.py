"""Planted: an error while reading a job is taken for a lost worker: the job is abandoned and its keys asked again."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def read_job(job: Callable[[], Iterable[Any]], into: queue.Queue, stop: threading.Event) -> None:
    """Every batch of `job()` into `into`, then a JobEnded, also when the job failed."""
    try:
        for batch in job():
            into.put(batch)
    except Exception:
        pass
    into.put(JobEnded())


honest.read_job = read_job   # exactly_once calls it by the solution's name
