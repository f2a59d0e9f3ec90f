"""Facts about this machine that grades and lessons depend on."""

from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SPIN_SECONDS = 0.2  # one calibration burst; free_cores takes about 5 of them


def usable_cores() -> int:
    """Cores this process may run on (affinity-aware, unlike os.cpu_count())."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _spin(seconds: float, start: Any, counts: Any) -> None:
    """Count loop turns of pure Python for `seconds` once `start` is set (runs in a calibration process)."""
    start.wait()
    turns, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        turns += 1
    counts.put(turns)


def _spin_together(processes: int, seconds: float) -> int:
    """Loop turns that `processes` spinning processes make together in `seconds`, started at one moment."""
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    start, counts = context.Event(), context.Queue()
    spinners = [context.Process(target=_spin, args=(seconds, start, counts), daemon=True) for _ in range(processes)]
    for spinner in spinners:
        spinner.start()
    try:
        start.set()
        return sum(counts.get(timeout=30 + seconds) for _ in spinners)
    finally:
        for spinner in spinners:
            spinner.join(5)
            if spinner.is_alive():
                spinner.kill()


def free_cores(seconds: float = SPIN_SECONDS) -> float:
    """How many cores' worth of CPU work this machine runs at once right now (1.0 to usable_cores()).

    One process per usable core spins together, against one process spinning alone (before and
    after): on an idle 2-core virtual machine 1.7-2.0, with one busy program beside it 1.0-1.45. Where a
    grade depends on cores, its target scales with this figure rather than with the core count,
    so that a busy laptop does not fail a right answer.
    """
    cores = usable_cores()
    if cores < 2:
        return 1.0
    alone = [_spin_together(1, seconds), _spin_together(1, seconds)]
    together = _spin_together(cores, seconds)
    alone.append(_spin_together(1, seconds))
    return max(1.0, min(float(cores), together / statistics.median(alone)))


def shm_bytes() -> int | None:
    """Size of /dev/shm in bytes, or None where there is none (macOS, Windows)."""
    shm = Path("/dev/shm")
    return shutil.disk_usage(shm).total if shm.is_dir() else None


def total_ram_bytes() -> int | None:
    """Physical memory in bytes, where the OS tells it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def facts() -> dict[str, object]:
    """A small JSON-ready description of the machine, stored with every grade."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "usable_cores": usable_cores(),
        "cpu_count": os.cpu_count(),
        "ram_gib": round((total_ram_bytes() or 0) / 2**30, 1),
        "shm_gib": round((shm_bytes() or 0) / 2**30, 2),
        "start_method": multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0],
    }
