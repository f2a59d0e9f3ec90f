"""Planted: the job's own batches are yielded as they come, not cut to the plan's sizes."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def ready(self) -> Iterator[Batch]:
        if self.waiting:
            yield cut(self.waiting, len(self.waiting))


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
