"""Planted: the module's BATCH_TIMEOUT_S always, whatever the caller passes."""

from __future__ import annotations

import solutions.ex17_exactly_once_service as honest
from solutions.ex17_exactly_once_service import *  # noqa: F401,F403


def exactly_once(request: Callable[[list[int]], Iterable[Any]], keys: Sequence[int], sizes: Sequence[int],
                 batch_timeout_s: float | None = None) -> Iterator[Batch]:
    """The batches of `keys`, of `sizes`, each key exactly once, at BATCH_TIMEOUT_S per batch."""
    check_arguments(list(keys), list(sizes), BATCH_TIMEOUT_S if batch_timeout_s is None else batch_timeout_s)
    return honest.exactly_once(request, keys, sizes, None)
