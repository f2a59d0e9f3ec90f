"""Planted: every sample gathered first, then the batches cut (simpler to get exactly once right)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def ready(self) -> Iterator[Batch]:
        return iter(())


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
