"""Planted defect: reports (path, reason) tuples instead of Skipped objects."""

import logging
from pathlib import Path

from solutions.ex01_profile_and_fix import Skipped, batched, decoded, find_bottleneck, profile_stages  # noqa: F401

log = logging.getLogger(__name__)


def _report(path, reason, skipped):
    log.warning("skipped %s: %s", path, reason)
    if skipped is not None:
        skipped.append((Path(path), reason))  # planted: a tuple


def load_batches(samples, batch_size=32, skipped=None):
    yield from batched(decoded(samples, skipped, report=_report), batch_size)
