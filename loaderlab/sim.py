"""Emulated slow storage, an emulated accelerator step, and a GIL-holding transform.

Storage latency and the accelerator step are emulated with `time.sleep`, which
releases the GIL like a real network read or a real GPU wait does, so a lesson's
gain comes from the overlap it teaches, not from how many cores the machine has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loaderlab.trace import Tracer, span


class SlowStorage:
    """Reads local files as if from network or object storage.

    Every request waits `latency_ms` plus its size over `bandwidth_mb_s` (per
    request: parallel requests each get the full bandwidth, as with many
    connections to an object store). Thread- and process-safe; counts requests.
    """

    def __init__(self, latency_ms: float = 5.0, bandwidth_mb_s: float | None = 200.0) -> None:
        self.latency_s = latency_ms / 1000
        self.bandwidth_bytes_s = bandwidth_mb_s * 1e6 if bandwidth_mb_s else None
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes_read = 0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def read(self, path: str | Path) -> bytes:
        """The whole file, after one request's latency and transfer time."""
        return self._deliver(Path(path).read_bytes())

    def read_range(self, path: str | Path, offset: int, length: int) -> bytes:
        """`length` bytes from `offset` (an HTTP range request), after its wait."""
        with open(path, "rb") as handle:
            handle.seek(offset)
            return self._deliver(handle.read(length))

    def _deliver(self, data: bytes) -> bytes:
        wait = self.latency_s + (len(data) / self.bandwidth_bytes_s if self.bandwidth_bytes_s else 0.0)
        time.sleep(wait)
        with self._lock:
            self.requests += 1
            self.bytes_read += len(data)
        return data


@dataclass(frozen=True)
class GPUReport:
    """What the emulated accelerator saw over a run of training steps."""

    steps: int
    wall_s: float
    busy_s: float
    waiting_s: float

    @property
    def utilization(self) -> float:
        """Share of wall time spent computing (the rest it waited for data)."""
        return self.busy_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else 0.0

    def __str__(self) -> str:
        return (
            f"{self.steps} steps in {self.wall_s:.2f} s: {self.steps_per_s:.1f} steps/s, "
            f"accelerator busy {self.utilization:.0%}, waiting for data {self.waiting_s:.2f} s"
        )


class SimulatedGPU:
    """A training step that takes `step_ms` and, like `loss.item()`, makes the host wait.

    The wait is a sleep, so loader threads keep running meanwhile. `train` drives a
    loop over batches and reports utilization and the time spent waiting for data.
    """

    def __init__(self, step_ms: float, tracer: Tracer | None = None) -> None:
        self.step_s = step_ms / 1000
        self.tracer = tracer

    def step(self, batch: Any = None) -> None:
        """One training step on `batch` (its content is not looked at)."""
        with span(self.tracer, "step", lane="accelerator"):
            time.sleep(self.step_s)

    def train(self, batches: Iterable[Any], max_steps: int | None = None) -> GPUReport:
        """Step over `batches`, timing how long each `next()` kept the accelerator idle."""
        busy = waiting = 0.0
        steps = 0
        start = time.perf_counter()
        iterator = iter(batches)
        try:
            while max_steps is None or steps < max_steps:
                asked = time.perf_counter()
                try:
                    batch = next(iterator)
                except StopIteration:
                    break
                got = time.perf_counter()
                waiting += got - asked
                if self.tracer is not None:
                    self.tracer.add("wait", asked, got, lane="accelerator")
                self.step(batch)
                busy += time.perf_counter() - got
                steps += 1
        finally:
            close = getattr(iterator, "close", None)
            if callable(close):
                close()
        return GPUReport(steps, time.perf_counter() - start, busy, waiting)


def gil_bound_transform(image: np.ndarray, iterations: int = 100_000) -> np.ndarray:
    """A brightness jitter computed by a pure-Python loop, so it holds the GIL throughout.

    A checksum over `iterations` sampled pixel values (one Python-level step each,
    about 5 to 10 ms per 100,000 on a laptop core) decides a shift in [-8, 7] that is
    added to every pixel. Deterministic: the same image gives the same output.
    Threads cannot run it in parallel; processes can.
    """
    flat = image.reshape(-1)
    stride = max(1, flat.size // iterations)
    values = flat[::stride][:iterations].tolist()
    checksum = 0
    for value in values:
        checksum = (checksum * 31 + value) % 65521
    shift = checksum % 16 - 8
    return np.clip(image.astype(np.int16) + shift, 0, 255).astype(np.uint8)

