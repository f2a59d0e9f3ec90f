"""Child processes: start one that stops with its owner, hear it announce that it is ready, stop it and all it started.

- **The owner's pipe.** A child that must not outlive the process that started it is started with its standard input
  a pipe its owner holds (`start_owned`), and stops when it reads end of file there (`when_owner_leaves`). The pipe
  closes however the owner ends, SIGKILL included (a test run stopped by a time limit), which no signal handler,
  `finally` or atexit sees. A program that cannot watch its standard input (SeaweedFS's `weed`) runs behind the
  guardian, this module as a command:

      python -m loaderlab.processes --grace S [--remove PATH ...] -- COMMAND ...

  It runs COMMAND, and when its own standard input closes it stops COMMAND (`stop_tree`, `--grace` seconds before
  SIGKILL) and removes the files named by `--remove` (what COMMAND leaves behind when stopped); its exit status is
  COMMAND's.
- **The announcement.** A child says it is ready with one JSON line on its standard output (`announce`); the owner
  reads it within a time limit (`read_announcement`).
- **Stopping.** `stop_tree` stops a process and every process it started, and nothing waits without a time limit.
- **Left behind.** `naming(path)` finds this machine's processes whose command line names a run's folder: what a run
  whose every process carries its folder there left running.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing.process
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import psutil

from loaderlab.paths import REPO_ROOT

KILL_WAIT_S = 5.0   # for a process sent SIGKILL to be gone: it cannot refuse, so this only bounds a stuck kernel
POLL_S = 0.01       # how often a stop looks whether the processes it signalled have exited
GUARD_POLL_S = 0.2  # how often the guardian looks whether its command ended by itself (its owner's end wakes it at once)

# What a stop takes: a child this process started (its exit status stays readable there) or any process by pid.
Stoppable = Union[subprocess.Popen, multiprocessing.process.BaseProcess, int]


# ---- stopping -----------------------------------------------------------------------------------------------------

def stop_tree(process: Stoppable, grace_s: float, kill_wait_s: float = KILL_WAIT_S) -> list[int]:
    """Stop `process` and every process it started (`stop_processes`, the descendants first: forked, they may hold
    the ends of pipes that the parent's waiters read); the pids still running after it all (none, normally).

    A Popen's standard input is closed first (a child started by `start_owned` begins to stop on that alone), its
    other pipes after its end (a thread may still read one). Nothing to do for a process already gone."""
    members: list[Any] = [] if isinstance(process, int) else [process]
    if not members or not _exited(process):   # an exited child's pid may be another process's now
        try:
            found = psutil.Process(process if isinstance(process, int) else process.pid)
            members = [*found.children(recursive=True), *(members or [found])]
        except psutil.Error:   # gone already
            pass
    if isinstance(process, subprocess.Popen) and process.stdin is not None:
        _close(process.stdin)
    alive = stop_processes(members, grace_s, kill_wait_s)
    if isinstance(process, subprocess.Popen):
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                _close(stream)
    return alive


def naming(path: Path | str) -> dict[int, str]:
    """This machine's processes whose command line names `path`: pid -> that command line (its first 300
    characters)."""
    found = {}
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or ())
        if str(path) in line:
            found[process.pid] = line[:300]
    return found


def stop_processes(processes: Sequence[Stoppable | psutil.Process], grace_s: float,
                   kill_wait_s: float = KILL_WAIT_S) -> list[int]:
    """Stop each of `processes`: SIGTERM to each, in their order, and up to `grace_s` for them to exit (`grace_s` =
    0: no SIGTERM, as a machine that dies), then SIGKILL to those left and up to `kill_wait_s` more; the pids still
    running after that. A child of this process is reaped through its own object, so that `Popen.returncode` or
    `Process.exitcode` tells how it ended; any other process counts as stopped once it is a zombie (its reaping is
    its parent's, or init's)."""
    alive: list[Any] = []
    for process in processes:
        try:
            alive.append(psutil.Process(process) if isinstance(process, int) else process)
        except psutil.Error:   # gone already
            pass
    if grace_s > 0:
        _signal(alive, kill=False)
        alive = _wait(alive, grace_s)
    _signal(alive, kill=True)
    return [member.pid for member in _wait(alive, kill_wait_s)]


def _signal(members: Sequence[Any], kill: bool) -> None:
    for member in members:
        try:
            member.kill() if kill else member.terminate()   # each checks first that it has not been reaped
        except (psutil.Error, ProcessLookupError):
            pass


def _wait(members: Sequence[Any], timeout_s: float) -> list[Any]:
    """Those of `members` still running after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    alive = [member for member in members if not _exited(member)]
    while alive and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive = [member for member in alive if not _exited(member)]
    return alive


def _exited(member: Any) -> bool:
    if isinstance(member, subprocess.Popen):
        return member.poll() is not None
    if isinstance(member, multiprocessing.process.BaseProcess):
        return member.exitcode is not None
    try:
        return not member.is_running() or member.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _close(stream: Any) -> None:
    try:
        stream.close()
    except OSError:
        pass


# ---- the owner's pipe ---------------------------------------------------------------------------------------------

def start_owned(command: Sequence[str], **popen: Any) -> subprocess.Popen:
    """Start `command` with its standard input a pipe this process holds: the child stops when the pipe closes
    (`when_owner_leaves`, or the guardian in front of it), by `stop_tree` or by this process's end, however it ends."""
    return subprocess.Popen(list(command), stdin=subprocess.PIPE, **popen)


def python_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) with this checkout first on PYTHONPATH: a child started as
    `python -m loaderlab...` runs this same code, whatever its working folder."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO_ROOT), env.get("PYTHONPATH"))))
    return env


def when_owner_leaves(then: Callable[[], None]) -> threading.Thread:
    """In a child started by `start_owned`: call `then` (in a daemon thread) once standard input reaches end of file,
    that is once the owner closed its end of the pipe or ended."""
    def watch() -> None:
        # Unbuffered: blocked in sys.stdin's reader, this thread would hold its lock while the interpreter shuts down
        # (when the child ends by itself), which aborts the process.
        while os.read(sys.stdin.fileno(), 4096):   # the owner writes nothing: b"" is end of file
            pass
        then()

    thread = threading.Thread(target=watch, name="owner-pipe", daemon=True)
    thread.start()
    return thread


# ---- the announcement ---------------------------------------------------------------------------------------------

def announce(**fields: Any) -> None:
    """In a child: say that it is ready, and what the owner needs to know, as one JSON line on standard output."""
    print(json.dumps(fields), flush=True)


def read_announcement(process: subprocess.Popen, timeout_s: float) -> dict[str, Any]:
    """The JSON line `process` announced itself with (its stdout a pipe); TimeoutError if none came within
    `timeout_s`; ValueError, with what it printed instead (b"" when it ended first), if the line is not one."""
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), name="announcement", daemon=True).start()
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        raise TimeoutError(f"no announcement within {timeout_s:g} s") from None
    try:
        fields = json.loads(line)
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        raise ValueError(f"printed {line[:200]!r} instead of announcing itself")
    return fields


# ---- the guardian -------------------------------------------------------------------------------------------------

def guard(command: Sequence[str], grace_s: float, leftovers: Sequence[str] = ()) -> int:
    """Run `command` until it ends, or until standard input closes: then stop it (`stop_tree`, `grace_s` before
    SIGKILL) and remove the files `leftovers`. Its exit status."""
    child = subprocess.Popen(list(command), stdin=subprocess.DEVNULL)
    owner_gone = threading.Event()

    def stop() -> None:
        owner_gone.set()
        stop_tree(child, grace_s)
        for path in leftovers:
            try:
                os.unlink(path)
            except OSError:
                pass

    watcher = when_owner_leaves(stop)
    while child.poll() is None and not owner_gone.wait(GUARD_POLL_S):
        pass
    if owner_gone.is_set():
        watcher.join(grace_s + 2 * KILL_WAIT_S)   # the stop above is bounded by grace_s + KILL_WAIT_S
    return child.returncode if child.returncode is not None else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m loaderlab.processes",
                                     usage="%(prog)s --grace S [--remove PATH ...] -- COMMAND ...",
                                     description="Run COMMAND; stop it when this process's standard input closes.")
    parser.add_argument("--grace", type=float, required=True, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--remove", action="append", default=[], help="a file to remove once COMMAND is stopped")
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no COMMAND after --")
    split = argv.index("--")
    options = parser.parse_args(argv[:split])
    return guard(argv[split + 1:], options.grace, options.remove)


if __name__ == "__main__":
    sys.exit(main())
