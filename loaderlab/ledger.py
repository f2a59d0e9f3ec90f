"""Ledgers: what processes write one JSON line at a time while they may be killed mid-line, and what they received.

The course's multi-process runs (`loaderlab.elastic`'s ranks and controller, `loaderlab.dataservice`'s trainer,
`loaderlab.raydata`'s driver) each append one JSON object per line as things happen (`Ledger`), so that a process
killed on purpose keeps what came before; the side that reads them (`read_json_lines`) skips the partial last line
such a kill leaves. `Visitation` counts how often each sample key of an epoch arrived.

A run of several epochs in one sandbox (`loaderlab.dataservice`, `loaderlab.raydata`) keeps them in its folder: the
owner writes the epochs' specs (`write_epochs`), the process in the sandbox reads them (`read_epochs`) and writes one
ledger per epoch (`epoch_ledger`), with a TIME_LIMIT event where its own time limit ended it (`ended_by_time_limit`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

SPECS_FILE = "specs.json"       # a run's epochs, in its folder
TIME_LIMIT = "time limit"       # the event a process writes to an epoch's ledger as its own time limit ends it
Spec = TypeVar("Spec")


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


def epoch_ledger(folder: Path, number: int) -> Path:
    """Epoch `number`'s ledger in a run's folder (0, 1, ...)."""
    return folder / f"ledger-{number}.jsonl"


def write_epochs(folder: Path, specs: Sequence[Any]) -> None:
    """The run's epochs (dataclasses) into its folder, each epoch's earlier ledger removed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SPECS_FILE).write_text(json.dumps([asdict(spec) for spec in specs], indent=1))
    for number in range(len(specs)):
        epoch_ledger(folder, number).unlink(missing_ok=True)


def read_epochs(folder: Path, spec_type: Callable[..., Spec]) -> list[Spec]:
    """The run's epochs, as `write_epochs` wrote them (a list field back as a tuple: JSON has none)."""
    return [spec_type(**{name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()})
            for fields in json.loads((folder / SPECS_FILE).read_text())]


def ended_by_time_limit(records: Iterable[dict[str, Any]]) -> bool:
    """Whether an epoch's ledger holds the TIME_LIMIT event of the process that wrote it."""
    return any(r["kind"] == "event" and r["event"] == TIME_LIMIT for r in records)


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
