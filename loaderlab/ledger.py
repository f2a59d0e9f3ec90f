"""Ledgers: what processes write one JSON line at a time while they may be killed mid-line, and what they received.

The course's multi-process runs (`loaderlab.elastic`'s ranks and controller, `loaderlab.dataservice`'s trainer,
`loaderlab.raydata`'s driver) each append one JSON object per line as things happen (`Ledger`), so that a process
killed on purpose keeps what came before; the side that reads them (`read_json_lines`) skips the partial last line
such a kill leaves. `Visitation` counts how often each sample key of an epoch arrived.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class Ledger:
    """Records appended to `path`, one JSON line each with its time `t`, its `kind`, the `common` fields and its own,
    written as they happen (line-buffered: a process killed keeps what came before)."""

    def __init__(self, path: Path, **common: Any) -> None:
        self._file = open(path, "a", buffering=1)
        self.common = common

    def add(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"t": time.time(), "kind": kind, **self.common, **fields}) + "\n")

    def event(self, event: str, **fields: Any) -> None:
        self.add("event", event=event, **fields)


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


@dataclass(frozen=True)
class Visitation:
    """How often each of an epoch's samples arrived: `once`, `more` (twice or more), `never` (keys), and the
    `delivered` total."""

    delivered: int
    once: int
    more: int
    never: list[int]

    @classmethod
    def count(cls, keys: Iterable[int], num_samples: int) -> Visitation:
        """The visitation of an epoch of keys 0..num_samples-1, from every key received (repeats included)."""
        counts = Counter(keys)
        return cls(sum(counts.values()), sum(1 for c in counts.values() if c == 1),
                   sum(1 for c in counts.values() if c > 1), [k for k in range(num_samples) if k not in counts])

    def __str__(self) -> str:
        return (f"{self.delivered} delivered: {self.once} samples once, {self.more} twice or more, "
                f"{len(self.never)} never")
