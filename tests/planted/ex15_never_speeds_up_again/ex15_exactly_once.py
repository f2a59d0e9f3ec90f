"""Planted defect: read_objects halves its window on SlowDowns and never grows it again."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class AimdWindow(_honest.AimdWindow):
    def release(self, ticket, slowdown):
        limit = self.limit
        super().release(ticket, slowdown)
        with self.changed:
            self.limit = min(self.limit, limit)  # planted: no additive increase


_honest.AimdWindow = AimdWindow
