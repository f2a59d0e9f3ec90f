"""Helpers for notebook 03 (processes): where each task ran and when, bars of measured figures, a worker that dies.

They live in a `.py` module because functions handed to worker processes must be importable by
name (spawn and forkserver re-import them), never defined in a notebook cell.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from functools import partial
from typing import TypeVar

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from loaderlab.trace import Span, Tracer, current_lane

T = TypeVar("T")
R = TypeVar("R")


def timed_call(function: Callable[[T], R], stage: str, item: T) -> tuple[R, Span]:
    """`function(item)`, and a span saying where (thread or process) and when it ran."""
    start = time.perf_counter()
    result = function(item)
    return result, Span(stage, current_lane(), start, time.perf_counter())


def traced_map(executor: Executor, function: Callable[[T], R], items: Iterable[T],
               stage: str = "transform") -> tuple[list[R], Tracer]:
    """`executor.map(function, items)`, with one span per item recorded in the thread or process that ran it.

    `function` must be picklable for a process pool (a top-level function or a partial of one).
    `perf_counter` reads the same clock in every process on Linux and macOS, so the spans line up.
    """
    tracer = Tracer()
    results = []
    for result, span in executor.map(partial(timed_call, function, stage), items):
        results.append(result)
        tracer.add(span.name, span.start, span.end, span.lane)
    return results, tracer


def bars(values: Mapping[str, float], unit: str, ax: Axes | None = None, title: str = "") -> Axes:
    """Horizontal bars, one per measured configuration, each labelled with its figure."""
    ax = ax if ax is not None else plt.subplots(figsize=(7, 0.5 + 0.45 * len(values)))[1]
    names = list(values)
    ax.barh(names, [values[n] for n in names], color="#4c72b0")
    for row, name in enumerate(names):
        ax.text(values[name], row, f" {values[name]:.1f} {unit}", va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_xlim(0, 1.2 * max(values.values(), default=1.0))
    ax.set_title(title)
    return ax


def die() -> None:
    """End this process at once, without raising and without a word to the parent, as the out-of-memory
    killer would (SIGKILL where the platform has it)."""
    if hasattr(signal, "SIGKILL"):
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(1)

