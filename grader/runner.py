"""Runs one check of one exercise in a fresh Python process, with a time limit (the parent side).

`run_check(...)` starts the grading child (`grader.child`: forked from a waiting process, `grader.preload`, or
`python -m grader.child ...`), kills the whole process group if it runs past its limit, and reads the child's
JSON verdict, what the learner's code printed (the child's output) and what the check printed (its notes).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from grader import preload, shm_ledger
from grader.child import START_METHOD_ENV
from grader.hints import crash_advice
from grader.results import ERROR, FAIL, PASS, SKIPPED, TIMEOUT, CheckResult
from loaderlab.machine import total_ram_bytes, usable_cores
from loaderlab.paths import REPO_ROOT
from loaderlab.processes import stop_processes

OUTPUT_TAIL_CHARS = 2000
MEMORY_CAP_ENV = "LOADERLAB_MEMORY_CAP_GB"   # overrides the default cap below
MEMORY_POLL_S = 0.25
KILLED_EXIT_WAIT_S = 30.0  # for a killed child's exit to be reported
TRACKER_EXIT_S = 3.0       # for a check's resource tracker to clean up after its processes and exit
# The most a check's processes may hold together (memory summed over the process tree): a runaway stops here
# instead of taking the machine down. See memory_cap_bytes for how it was chosen.
DEFAULT_MEMORY_CAP_GIB = 6.0
# More per usable core past two: the course's own loaders start a worker per core, a train and a val loader each
# (exercise 11's solution on a 16-core GPU machine went past 6 GiB of summed resident memory, 2026-11-22).
MEMORY_CAP_PER_EXTRA_CORE_GIB = 0.5
QUIET_CHILD_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # TensorFlow's start-up lines are not the learner's output
# Set anew for every check (pytest names the running test): they never decide what a waiting process imports.
PER_CHECK_ENV = (shm_ledger.LEDGER_ENV, START_METHOD_ENV, "PYTEST_CURRENT_TEST")


def memory_cap_bytes() -> int:
    """$LOADERLAB_MEMORY_CAP_GB, else the default cap plus a share per usable core past two, never more than half
    of this machine's memory."""
    default = DEFAULT_MEMORY_CAP_GIB + MEMORY_CAP_PER_EXTRA_CORE_GIB * max(0, usable_cores() - 2)
    cap = float(os.environ.get(MEMORY_CAP_ENV, default)) * 2**30
    ram = total_ram_bytes()
    return int(min(cap, ram / 2) if ram else cap)


class MemoryWatch:
    """Polls the resident memory of a process and all its descendants; kills the group past `cap` bytes."""

    def __init__(self, pid: int, cap: int) -> None:
        self.pid, self.cap = pid, cap
        self.peak = 0
        self.exceeded = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="grader-memory-watch", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(MEMORY_POLL_S):
            try:
                root = psutil.Process(self.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            total = _tree_bytes(tree, proportional=False)
            if total > self.cap:  # resident memory counts the pages forked workers share once per worker: recount
                total = _tree_bytes(tree, proportional=True)
            self.peak = max(self.peak, total)
            if total > self.cap:
                self.exceeded = True
                _kill_group(self.pid)
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _tree_bytes(tree: list[psutil.Process], proportional: bool) -> int:
    """Resident bytes summed over `tree` (cheap), or, with `proportional`, each shared page divided among the
    processes that share it (Linux's PSS, read where the system gives it; resident bytes elsewhere)."""
    total = 0
    for process in tree:
        try:
            if proportional:
                total += getattr(process.memory_full_info(), "pss", 0) or process.memory_info().rss
            else:
                total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _end_session(pid: int) -> None:
    """Kill what is left of the check's process group (`stop_processes`), multiprocessing's resource trackers last:
    once the others are gone, a tracker unlinks the named semaphores they leaked and exits by itself (killed first,
    it cannot). The group's SIGKILL at the end takes a tracker still there, and whatever started meanwhile."""
    trackers, others = [], []
    for member in psutil.pids():
        try:
            if member == os.getpid() or os.getpgid(member) != pid:  # a system call each: no /proc read for others
                continue
            process = psutil.Process(member)
            (trackers if "resource_tracker" in " ".join(process.cmdline()) else others).append(process)
        except (OSError, psutil.Error):
            continue
    stop_processes(others, grace_s=0)
    psutil.wait_procs(trackers, timeout=TRACKER_EXIT_S)
    _kill_group(pid)


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def run_check(target: Path, exercise: str, check: str, timeout_s: float, start_method: str | None = None) -> CheckResult:
    """Run `grader.checks.<exercise>.<check>` against `<target>/<exercise>.py` in a new process.

    `start_method` ("fork", "spawn", "forkserver") becomes the child's default way to start worker
    processes, so every loader that does not choose one itself is graded under it. The child's
    processes may hold `memory_cap_bytes()` together; past that they are stopped and the check fails.
    """
    return _run_in_child(target, exercise, [check], timeout_s, start_method)[check]


def run_checks_together(target: Path, exercise: str, checks: list[str], timeout_s: float) -> dict[str, CheckResult]:
    """Run several checks one after another in ONE new process, within `timeout_s` together.

    Only for the project's tests: untouched stubs, where every check stops at its first TODO, and
    correct alternatives, which leave nothing behind; it saves a Python start and a torch or TensorFlow
    import per check. A learner's checks always run one per process (`run_check`), so one check's
    leftovers never reach another's verdict.
    """
    return _run_in_child(target, exercise, checks, timeout_s, None)


def _run_in_child(target: Path, exercise: str, checks: list[str], timeout_s: float,
                  start_method: str | None) -> dict[str, CheckResult]:
    """Start `python -m grader.runner` for `checks`, watch its time and memory, and read its verdicts."""
    with tempfile.TemporaryDirectory(prefix="loaderlab-grade-") as tmp:
        verdict_file = Path(tmp) / "verdict.json"
        ledger = Path(tmp) / "shm-created.txt"
        env = os.environ | QUIET_CHILD_ENV | {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
            shm_ledger.LEDGER_ENV: str(ledger),
        }
        if start_method:
            env[START_METHOD_ENV] = start_method
        output_file, notes_file = Path(tmp) / "output.txt", Path(tmp) / "notes.txt"
        argv = [str(target), exercise, ",".join(checks), str(verdict_file), str(notes_file)]
        start = time.perf_counter()
        child = _start_child(exercise, argv, env, output_file)
        watch = MemoryWatch(child.pid, memory_cap_bytes())
        try:
            returncode = child.wait(timeout_s)
            timed_out = returncode is None
            if timed_out:
                _end_session(child.pid)
                returncode = child.wait(KILLED_EXIT_WAIT_S)
                if returncode is None:
                    returncode = -signal.SIGKILL
        finally:
            watch.stop()
            _end_session(child.pid)  # whatever the check left running in its session ends with it
            child.release()
            shm_ledger.unlink_leftovers(ledger)  # and what they left in shared memory
        output = _tail(output_file.read_bytes() if output_file.exists() else b"")
        notes = _tail(notes_file.read_bytes() if notes_file.exists() else b"")
        seconds = time.perf_counter() - start
        peak = round(watch.peak / 2**20)
        if watch.exceeded:
            message = (
                f"unbounded memory growth: the check's processes grew past {_gib(watch.cap)} together and were "
                "stopped before they could take the machine down. Something keeps everything it is given: a "
                "queue or buffer without a bound, a list of results nobody consumes, or a reader that runs "
                f"ahead of its consumer forever. (Raise the cap with {MEMORY_CAP_ENV}=<GiB> if you really need more.)")
            return {check: CheckResult(exercise, check, FAIL, message, seconds, output=output, peak_memory_mib=peak,
                                       notes=notes) for check in checks}
        if timed_out:
            grew = f" Its processes held {_gib(watch.peak)} at the peak, so memory growth is likely too." \
                if watch.peak > watch.cap / 2 else ""
            message = (
                f"did not finish within {timeout_s:.0f} s and was stopped. A blocking wait with no "
                "timeout is the usual cause: queue.get() or join() on a worker that died or was never "
                "told to stop, or a producer blocked on a full queue after the consumer left." + grew)
            return {check: CheckResult(exercise, check, TIMEOUT, message, seconds, output=output, peak_memory_mib=peak,
                                       notes=notes) for check in checks}
        verdicts = json.loads(verdict_file.read_text()) if verdict_file.exists() else {}
        results = {}
        for check in checks:
            if check not in verdicts:
                results[check] = CheckResult(exercise, check, ERROR, _crash_message(exercise, returncode),
                                             seconds, output=output, peak_memory_mib=peak, notes=notes)
                continue
            verdict = verdicts[check]
            shown = verdict["status"] not in (PASS, SKIPPED)  # what was printed is kept for a failure only
            results[check] = CheckResult(exercise, check, verdict["status"], verdict["message"], seconds,
                                         verdict.get("metrics"), output if shown else "", peak_memory_mib=peak,
                                         notes=notes if shown else "")
        return results


class _FreshInterpreter:
    """A grading child started as `python -m grader.child ...`, in its own session."""

    def __init__(self, argv: list[str], env: dict[str, str], output_file: Path) -> None:
        with output_file.open("wb") as output:
            self.process = subprocess.Popen([sys.executable, "-m", "grader.child", *argv], cwd=REPO_ROOT, env=env,
                                            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.pid = self.process.pid

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def release(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(KILLED_EXIT_WAIT_S)


class _Forked:
    """A grading child forked from the exercise's waiting process (`grader.preload`), in its own session."""

    def __init__(self, waiting: preload.WaitingProcess, argv: list[str], env: dict[str, str], output_file: Path) -> None:
        self.waiting = waiting
        self.pid = waiting.start(argv, env, output_file)
        self.collected = False

    def wait(self, timeout_s: float) -> int | None:
        returncode = self.waiting.wait(timeout_s)
        self.collected = returncode is not None
        return returncode

    def release(self) -> None:
        """A waiting process whose child's exit went unread (an error, Ctrl-C) is closed, not reused."""
        if not self.collected:
            preload.discard(self.waiting)


def _start_child(exercise: str, argv: list[str], env: dict[str, str], output_file: Path) -> _FreshInterpreter | _Forked:
    """A child forked from a waiting process where that is available and works, else a fresh interpreter."""
    if preload.available():
        imports_env = {k: v for k, v in env.items() if k not in PER_CHECK_ENV}
        try:
            waiting = preload.waiting_process(exercise, imports_env)
            return _Forked(waiting, argv, env, output_file)
        except ChildProcessError:
            pass  # the waiting process failed: this check starts an interpreter of its own, as everywhere else
    return _FreshInterpreter(argv, env, output_file)


def _crash_message(exercise: str, returncode: int) -> str:
    """What a grading process that ended without a verdict means, in the learner's terms."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        how = (f"was killed by {name} (exit code {returncode})"
               + (": a crash in native code" if name in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL") else "")
               + (", perhaps the out-of-memory killer" if name == "SIGKILL" else ""))
    else:
        how = f"exited with code {returncode} before giving a verdict (os._exit, sys.exit in a thread, or a crash)"
    advice = crash_advice(exercise)
    return f"the grading process {how}." + (f" In this exercise that usually means: {advice}" if advice else "")


def _tail(output: bytes) -> str:
    return output.decode(errors="replace")[-OUTPUT_TAIL_CHARS:]
