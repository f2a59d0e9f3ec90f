"""Planted: a minute per batch, to be safe on a slow machine."""

from __future__ import annotations

from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


BATCH_TIMEOUT_S = 60.0
