"""Planted defect: reports to `skipped` when a list is given and logs nothing, so with skipped=None a loss is silent."""

from pathlib import Path

from solutions.ex01_profile_and_fix import Skipped, batched, decoded, find_bottleneck, profile_stages  # noqa: F401


def _report(path, reason, skipped):
    if skipped is not None:  # planted: and no log line
        skipped.append(Skipped(Path(path), reason))


def load_batches(samples, batch_size=32, skipped=None):
    yield from batched(decoded(samples, skipped, report=_report), batch_size)
