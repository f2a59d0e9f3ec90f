"""Planted defect: `skipped = skipped or []` replaces the caller's empty list with a new one, so no report reaches the caller."""

import logging
from pathlib import Path

from solutions.ex01_profile_and_fix import Skipped, batched, decoded, find_bottleneck, profile_stages  # noqa: F401

log = logging.getLogger(__name__)


def _report(path, reason, skipped):
    log.warning("skipped %s: %s", path, reason)
    report = skipped or []  # planted: an empty list is falsy too
    report.append(Skipped(Path(path), reason))


def load_batches(samples, batch_size=32, skipped=None):
    yield from batched(decoded(samples, skipped, report=_report), batch_size)
