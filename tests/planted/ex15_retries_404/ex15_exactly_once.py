"""Planted defect: every error answer is retried, 403 and 404 too: the same answer, max_attempts times, later."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403

_honest.RETRIED_STATUSES = frozenset(range(400, 600))  # planted: 4xx never gets better, yet it is retried
