"""Planted: every sample that arrives is passed on: a restarted worker's repeats reach the trainer."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


class ServedEpoch(honest.ServedEpoch):
    def take(self, batch: Any) -> None:
        batch_keys, batch_labels, batch_images = batch
        for row, key in enumerate(np.asarray(batch_keys).tolist()):
            if key not in self.wanted:
                raise ValueError(f"the service sent key {key}, which was not asked for")
            self.received.add(key)
            self.waiting.append((key, np.asarray(batch_labels[row]), np.asarray(batch_images[row])))


honest.ServedEpoch = ServedEpoch   # exactly_once builds it by the solution's name
