"""Planted: the job read without a deadline: the service's own retries are trusted to end a silent job."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def items(self, answers: queue.Queue) -> Iterator[Any]:
        while not isinstance(item := answers.get(), JobEnded):
            if isinstance(item, Exception):
                raise item
            yield item


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
