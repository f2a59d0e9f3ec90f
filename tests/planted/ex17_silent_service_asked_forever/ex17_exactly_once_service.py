"""Planted: a job that sends nothing is asked again, and again: the service may come back."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def ask_again(self, delivered: bool) -> bool:
        return True


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
