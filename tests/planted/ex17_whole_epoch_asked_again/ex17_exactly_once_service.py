"""Planted: a job that ends short is asked again for the whole epoch (duplicates are dropped anyway)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def still_missing(self) -> list[int]:
        return list(self.keys) if len(self.received) < len(self.wanted) else []


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
