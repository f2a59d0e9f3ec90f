"""loaderlab.processes: `stop_tree` stops a process and what it started, even one that ignores SIGTERM; a child
started by `start_owned` stops when its owner ends, even killed with SIGKILL; the guardian does that for a program
that does not read its standard input; an announcement is read within its time limit.

The children here are small Python programs (`python -c`), so each test takes a second or less.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from loaderlab.processes import python_environment, read_announcement, start_owned, stop_tree
from owners import assert_child_gone_with_its_killed_owner  # tests/ is on sys.path

STOPPED_WITHIN_S = 10.0   # a child told to stop is gone within this (it needs a fraction of a second)

# A process that ignores SIGTERM and starts a child that ignores it too; it prints the child's pid, then sleeps.
STUBBORN_PARENT = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "print('ready', flush=True); time.sleep(120)"], stdout=subprocess.PIPE)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(120)
"""

def _python(code: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], env=python_environment(), **popen)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM cannot be ignored on Windows: terminate() kills")
def test_stop_tree_kills_what_ignores_sigterm_children_first_and_keeps_the_exit_status() -> None:
    parent = _python(STUBBORN_PARENT, stdout=subprocess.PIPE, text=True)
    child = psutil.Process(int(parent.stdout.readline()))
    started = time.monotonic()
    assert stop_tree(parent, grace_s=0.5) == []
    assert time.monotonic() - started < 0.5 + STOPPED_WITHIN_S
    assert parent.returncode == -signal.SIGKILL and parent.stdout.closed
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert stop_tree(parent, grace_s=0.5) == []   # gone already: nothing to do
    assert stop_tree(child.pid, grace_s=0.5) == []


def test_a_child_started_owned_stops_when_its_owner_is_killed() -> None:
    """The proxy's case: the owner is killed with SIGKILL, so nothing of it runs to stop the child; its end of the
    child's standard input closes, and the child's `when_owner_leaves` stops it."""
    owner = _python(
        "import os, subprocess, sys, time\n"
        "from loaderlab.processes import python_environment, read_announcement, start_owned\n"
        "child = start_owned([sys.executable, '-c', 'import os, threading\\n'\n"
        "    'from loaderlab.processes import announce, when_owner_leaves\\n'\n"
        "    'gone = threading.Event()\\n'\n"
        "    'when_owner_leaves(gone.set)\\n'\n"
        "    'announce(pid=os.getpid())\\n'\n"
        "    'gone.wait(120)\\n'], stdout=subprocess.PIPE, env=python_environment())\n"
        "print(read_announcement(child, 20)['pid'], flush=True)\n"
        "time.sleep(120)\n", stdout=subprocess.PIPE, text=True)
    assert_child_gone_with_its_killed_owner(owner, STOPPED_WITHIN_S)


def test_the_guardian_stops_its_command_and_removes_its_leftovers_when_its_input_closes(tmp_path: Path) -> None:
    leftover = tmp_path / "left.sock"
    leftover.touch()
    guardian = start_owned([sys.executable, "-m", "loaderlab.processes", "--grace", "5", f"--remove={leftover}", "--",
                            sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"],
                           stdout=subprocess.PIPE, env=python_environment())
    assert guardian.stdout.readline() == b"up\n"
    command = psutil.Process(guardian.pid).children()
    guardian.stdin.close()
    assert guardian.wait(STOPPED_WITHIN_S) == 256 - signal.SIGTERM   # the command's status, killed by SIGTERM
    assert not leftover.exists() and not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in command)
    guardian.stdout.close()


def test_the_guardians_status_is_its_commands_when_the_command_ends_by_itself() -> None:
    guardian = start_owned([sys.executable, "-m", "loaderlab.processes", "--grace", "5", "--",
                            sys.executable, "-c", "raise SystemExit(3)"], env=python_environment())
    try:
        assert guardian.wait(STOPPED_WITHIN_S) == 3
    finally:
        stop_tree(guardian, grace_s=0)


@pytest.mark.parametrize("code, timeout_s, expected", [
    ("import time; time.sleep(120)", 0.2, (TimeoutError, "no announcement within 0.2 s")),
    ("print('hello')", 10, (ValueError, "printed b'hello\\\\n' instead")),
    ("from loaderlab.processes import announce; announce(port=1, pid=2)", 20, {"port": 1, "pid": 2}),
])
def test_an_announcement_is_read_within_its_time_limit_or_said_missing(code: str, timeout_s: float,
                                                                      expected: object) -> None:
    child = _python(code, stdout=subprocess.PIPE)
    try:
        if isinstance(expected, dict):
            assert read_announcement(child, timeout_s) == expected
        else:
            with pytest.raises(expected[0], match=expected[1]):
                read_announcement(child, timeout_s)
    finally:
        stop_tree(child, grace_s=5)
