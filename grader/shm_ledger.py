"""A ledger of the shared-memory segments the graded code creates, so that the leak check judges
only those, and never touches another program's segments.

The grading process installs `record_creations()` when it starts (`grader.child` does, at import),
and so does every worker process it starts: fork copies the patched function, spawn re-imports
`grader.child` as the workers' main module, and forkserver preloads this module. Each process
appends the name of every POSIX segment it creates to the file named by $LOADERLAB_SHM_LEDGER.
"""

from __future__ import annotations

import os
from pathlib import Path

LEDGER_ENV = "LOADERLAB_SHM_LEDGER"


def record_creations() -> None:
    """Patch `_posixshmem.shm_open` (what `multiprocessing.shared_memory` calls) to log every segment created.

    Does nothing where there is no ledger to write or no POSIX shared memory (Windows, where a
    named segment vanishes with its last handle and so cannot leak).
    """
    ledger = os.environ.get(LEDGER_ENV)
    try:
        import _posixshmem
    except ImportError:
        return
    if not ledger or getattr(_posixshmem.shm_open, "records_to", None) == ledger:
        return
    original = getattr(_posixshmem.shm_open, "original", _posixshmem.shm_open)

    def shm_open(path: str, flags: int, mode: int = 0o777) -> int:
        descriptor = original(path, flags, mode=mode)
        if flags & os.O_CREAT:
            with open(ledger, "a", encoding="utf-8") as handle:  # one short line per write: appends do not interleave
                handle.write(path.lstrip("/") + "\n")
        return descriptor

    shm_open.original = original  # type: ignore[attr-defined]
    shm_open.records_to = ledger  # type: ignore[attr-defined]
    _posixshmem.shm_open = shm_open
    import multiprocessing.forkserver

    multiprocessing.forkserver.set_forkserver_preload(["__main__", __name__])


def unlink_leftovers(ledger: Path) -> list[str]:
    """Unlink every segment in `ledger` that still exists; their names. The runner calls this once a check's processes
    are all gone: a segment they created and did not unlink belongs to nobody now (a loader abandoned mid-hang, a
    check killed at its time limit), and nothing else is touched."""
    try:
        import _posixshmem
    except ImportError:
        return []
    if not ledger.is_file():
        return []
    removed = []
    for name in sorted(set(ledger.read_text(encoding="utf-8").split())):
        try:
            _posixshmem.shm_unlink("/" + name)
            removed.append(name)
        except FileNotFoundError:
            continue
    return removed


def created() -> set[str]:
    """Names (as listed in /dev/shm) of every segment the graded code has created so far."""
    ledger = os.environ.get(LEDGER_ENV)
    if not ledger or not Path(ledger).is_file():
        return set()
    return set(Path(ledger).read_text(encoding="utf-8").split())


record_creations()
