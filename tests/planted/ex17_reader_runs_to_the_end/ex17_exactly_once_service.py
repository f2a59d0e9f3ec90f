"""Planted: the job's reader fills an unbounded queue and runs to the job's end, whoever still listens."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def read_job(job: Callable[[], Iterable[Any]], into: queue.Queue, stop: threading.Event) -> None:
    """Every batch of `job()` into `into`, then a JobEnded (or the exception)."""
    try:
        for batch in job():
            into.queue.append(batch)
            with into.not_empty:
                into.not_empty.notify()
        into.put(JobEnded())
    except Exception as error:
        into.put(error)


honest.read_job = read_job   # exactly_once calls it by the solution's name
