"""Reading back a ledger that processes write one JSON line at a time while they may be killed mid-line.

The course's multi-process runs (`loaderlab.elastic`'s ranks and controller, `loaderlab.dataservice`'s trainer) each
append one JSON object per line as things happen, so that a process killed on purpose keeps what came before; the
side that reads them skips the partial last line such a kill leaves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def read_json_lines(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Every complete JSON line of `paths`, in order (a missing file reads as empty; a process killed mid-line leaves
    a partial last line: skipped)."""
    records = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records
