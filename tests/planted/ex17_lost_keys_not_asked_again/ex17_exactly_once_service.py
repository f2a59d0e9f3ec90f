"""Planted: a job that ends is the epoch's end: what it lost stays lost (DYNAMIC's at most once, trusted)."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def ask_again(self, delivered: bool) -> bool:
        return False


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
