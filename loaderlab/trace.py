"""Recording what ran when: spans of work per thread or process, for timelines.

`perf_counter` reads the same monotonic clock in every process on Linux and
macOS, so spans recorded in workers and sent back line up with the parent's.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import ContextManager

STAGES = ("read", "decode", "transform", "collate", "wait", "step")


@dataclass(frozen=True)
class Span:
    """One piece of work: its stage name, the lane (thread or process) it ran on, its times."""

    name: str
    lane: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def current_lane() -> str:
    """'MainThread', 'Thread-3', or 'SpawnProcess-2' style name of where we run."""
    process = multiprocessing.current_process().name
    thread = threading.current_thread().name
    return thread if process == "MainProcess" else f"{process}/{thread}" if thread != "MainThread" else process


class Tracer:
    """Collects spans from any thread (list.append is atomic under the GIL)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    @contextmanager
    def span(self, name: str, lane: str | None = None) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, start, time.perf_counter(), lane)

    def add(self, name: str, start: float, end: float, lane: str | None = None) -> None:
        self.spans.append(Span(name, lane or current_lane(), start, end))

    def extend(self, spans: Iterable[Span]) -> None:
        """Merge spans recorded elsewhere (a worker process sends its list back)."""
        self.spans.extend(spans)

    def seconds_by_stage(self) -> dict[str, float]:
        """Total seconds per stage name, over all lanes."""
        totals: dict[str, float] = defaultdict(float)
        for item in self.spans:
            totals[item.name] += item.seconds
        return dict(totals)


def span(tracer: Tracer | None, name: str, lane: str | None = None) -> ContextManager[None]:
    """`tracer.span(...)`, or a no-op when tracing is off (tracer is None)."""
    return nullcontext() if tracer is None else tracer.span(name, lane)
