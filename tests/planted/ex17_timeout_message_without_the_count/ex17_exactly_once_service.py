"""Planted: the TimeoutError says only that the service timed out."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def ask_again(self, delivered: bool) -> bool:
        if not delivered:
            raise TimeoutError("the service timed out")
        return True


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
