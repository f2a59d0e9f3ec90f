"""Planted defect: read_objects keeps max_in_flight requests open whatever the store answers: each call backs off
on its own, but the store still sees max_in_flight clients retrying."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class AimdWindow(_honest.AimdWindow):
    def release(self, ticket, slowdown):
        super().release(ticket, False)  # planted: a SlowDown is not back-pressure


_honest.AimdWindow = AimdWindow
