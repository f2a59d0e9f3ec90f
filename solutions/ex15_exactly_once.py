"""Exercise 15, the answer: exactly once over a flaky network, on every rank.

Design (see each piece's docstring):
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from loaderlab.storage.server import Endpoint  # noqa: F401


@dataclass(frozen=True)
class RetryPolicy:
    """How one request is retried (the grader varies every field)."""

    max_attempts: int = 6        # attempts per call, the first included
    base_delay_s: float = 0.05   # the wait before retry n is at most min(max_delay_s, base_delay_s * 2 ** (n - 1))
    max_delay_s: float = 1.0


class RemoteSample(NamedTuple):
    """One sample read from the store."""

    key: str     # the sample's key, as the index says ("circles/circles_000003")
    data: bytes  # the image file's bytes, as stored
    label: int


# ==== read_object, read_objects (engineer A) =========================================================================


# ==== RemoteEpochs (engineer B) ======================================================================================
