"""Facts about this machine that grades and lessons depend on."""

from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import sys
from pathlib import Path


def usable_cores() -> int:
    """Cores this process may run on (affinity-aware, unlike os.cpu_count())."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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
