"""For the tests of what stops with its owner: kill the owner with SIGKILL, the one way nothing of it runs to stop its
children, and see that its child went too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

from loaderlab.processes import python_environment

# An owner that starts a run in a thread, prints the pids of every process under it once one of the run's ledgers
# holds a given mark, and waits to be killed. Formatted with `start`, Python lines that start the run in a daemon
# thread with `folder`, `threading` and `time` in scope.
OWNER = """
import sys, threading, time
from pathlib import Path
import psutil
folder, ledgers, mark, within_s = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
{start}
deadline = time.monotonic() + within_s
while not any(mark in p.read_text() for p in folder.glob(ledgers)):
    assert time.monotonic() < deadline, f"no {{mark}} in {{folder / ledgers}} within {{within_s:g}} s"
    time.sleep(0.1)
print(" ".join(str(p.pid) for p in psutil.Process().children(recursive=True)), flush=True)
time.sleep(600)
"""


def start_owner(start: str, folder: Path, ledgers: str, mark: str, within_s: float) -> subprocess.Popen:
    """An owner process (OWNER) that runs `start`, then prints its descendants' pids once a file of `folder` matching
    the glob `ledgers` holds `mark` (within `within_s`, or it fails saying so)."""
    return subprocess.Popen([sys.executable, "-c", OWNER.format(start=start), str(folder), ledgers, mark,
                             str(within_s)], stdout=subprocess.PIPE, text=True, env=python_environment())


def assert_child_gone_with_its_killed_owner(owner: subprocess.Popen, within_s: float) -> None:
    """`owner` prints the pid of a child it started (or several, space-separated) as its first line of output: kill
    the owner with SIGKILL, and fail (psutil.TimeoutExpired) unless every one of them is gone within `within_s`."""
    try:
        children = [psutil.Process(int(pid)) for pid in owner.stdout.readline().split()]
        owner.kill()
        owner.wait(within_s)
        for child in children:
            child.wait(within_s)
    finally:
        owner.kill()
        owner.stdout.close()
