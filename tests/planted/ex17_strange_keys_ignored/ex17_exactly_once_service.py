"""Planted: a key not asked for is skipped, as a repeat is."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def take(self, batch: Any) -> None:
        keys = np.asarray(batch[0]).tolist()
        kept = [row for row, key in enumerate(keys) if key in self.wanted]
        super().take(tuple(np.asarray(part)[kept] for part in batch))


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
