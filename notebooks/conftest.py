"""A notebook's cells share one kernel and run in order: under pytest-xdist's `--dist loadgroup`
(how `make test` runs notebooks beside the other untimed tests) they stay together on one worker."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).parent.resolve()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb" and item.path.resolve().parent == NOTEBOOKS:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
