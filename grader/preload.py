"""Grading processes forked from one that has already imported an exercise's checks.

Every check runs in a new process, and importing torch, torchvision or TensorFlow there costs 2-4 s on
2 cores: for a grade of 100 checks, minutes. On Linux, one waiting process per exercise imports
`grader.checks.<exercise>` and the libraries its PRELOAD names once, then forks a child for each check. The child
is as new to the learner's code as a fresh interpreter: the exercise is imported only after the fork,
in a new session, with its own output file and environment. Nothing runs in the waiting process but
imports: the few native threads torch and TensorFlow start there sit idle whenever it forks.

Elsewhere (macOS and Windows: fork after these imports is unsafe or missing), or with
LOADERLAB_FRESH_INTERPRETER=1, `grader.runner` starts a new interpreter (`python -m grader.child`) for every check instead.

Protocol (one JSON line each way, over the waiting process's stdin and stdout): a request
{"argv", "env", "output"} is answered by {"pid"} as soon as the child exists, then {"returncode"}.
The child's environment is the request's, whole; a waiting process serves one environment (the
one it imported under), so a session that changes its environment gets another waiting process.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import IO

from loaderlab.paths import REPO_ROOT
from loaderlab.processes import stop_tree

FRESH_INTERPRETER_ENV = "LOADERLAB_FRESH_INTERPRETER"
# Waiting processes kept per grading session: a grade runs exercise after exercise, so 2 suffice; the
# project's tests visit exercises in turn many times over, and `make test` keeps one per exercise.
KEEP_WAITING_ENV = "LOADERLAB_WAITING_PROCESSES"
READY_TIMEOUT_S = 120.0   # for the imports of a new waiting process


def available() -> bool:
    """Whether checks may run in children forked from a waiting process (Linux, and not switched off)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and os.environ.get(FRESH_INTERPRETER_ENV) != "1"


class WaitingProcess:
    """Parent side: one waiting process that has imported one exercise's checks."""

    def __init__(self, exercise: str, env: dict[str, str]) -> None:
        self.exercise = exercise
        self._unread = b""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader.preload", exercise], cwd=REPO_ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if self._reply(READY_TIMEOUT_S) is None:  # {"ready": ...}: the imports are done
            self.close()
            raise ChildProcessError(f"the waiting process for {exercise} did not finish its imports")

    def _reply(self, timeout_s: float) -> dict | None:
        """The next line from the waiting process, or None if none came within `timeout_s`.

        Reads the pipe's descriptor directly: a buffered reader could hold the next line while
        select() reports nothing to read.
        """
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._unread:
            ready, _, _ = select.select([descriptor], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(descriptor, 65536)
            if not chunk:
                raise ChildProcessError(f"the waiting process for {self.exercise} ended")
            self._unread += chunk
        line, self._unread = self._unread.split(b"\n", 1)
        return json.loads(line)

    def start(self, argv: list[str], env: dict[str, str], output: Path) -> int:
        """Fork a child that runs `grader.child` with argv; its pid (also its process group)."""
        assert self.process.stdin is not None
        request = {"argv": argv, "env": env, "output": str(output)}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        reply = self._reply(READY_TIMEOUT_S)
        if reply is None or "pid" not in reply:
            raise ChildProcessError(f"the waiting process for {self.exercise} did not start a child: {reply}")
        return int(reply["pid"])

    def wait(self, timeout_s: float) -> int | None:
        """The child's exit code (negative: killed by that signal), or None if it still runs after `timeout_s`."""
        reply = self._reply(timeout_s)
        return None if reply is None else int(reply["returncode"])

    def close(self) -> None:
        """Stop the waiting process, and a child of it still running (`stop_tree`: killed, its pipes closed)."""
        stop_tree(self.process, grace_s=0)


_waiting: OrderedDict[tuple[str, str], WaitingProcess] = OrderedDict()
_lock = threading.Lock()


def waiting_process(exercise: str, env: dict[str, str]) -> WaitingProcess:
    """This session's waiting process for `exercise` under `env`, started on first use.

    The least recently used ones beyond $LOADERLAB_WAITING_PROCESSES (default 2) are closed.
    """
    key = (exercise, json.dumps(env, sort_keys=True))
    with _lock:
        if key in _waiting and _waiting[key].process.poll() is None:
            _waiting.move_to_end(key)
            return _waiting[key]
        if key in _waiting:
            _waiting.pop(key).close()
        while len(_waiting) >= max(1, int(os.environ.get(KEEP_WAITING_ENV, "2"))):
            _waiting.popitem(last=False)[1].close()
        _waiting[key] = WaitingProcess(exercise, env)
        return _waiting[key]


def discard(process: WaitingProcess) -> None:
    """Close a waiting process that misbehaved; the next check starts a new one."""
    with _lock:
        for key, known in list(_waiting.items()):
            if known is process:
                del _waiting[key]
    process.close()


@atexit.register
def _close_all() -> None:
    with _lock:
        while _waiting:
            _waiting.popitem()[1].close()


# ---- the waiting process --------------------------------------------------------------------------


def _run_child(request: dict, replies: IO[str]) -> None:
    """In the forked child: become a fresh grading process, run the runner, never return."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        output = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(devnull, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        for descriptor in (devnull, output):
            os.close(descriptor)  # the check sees stdin, stdout and stderr only, as in a new interpreter
        replies.close()
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(REPO_ROOT)
        _fresh_random_state()
        from grader import child, shm_ledger

        shm_ledger.record_creations()  # the ledger file is this check's, named in the request's env
        sys.modules["__main__"] = child  # what spawn-started workers import as their main module, as before
        sys.argv = [child.__file__, *request["argv"]]
        child.main(request["argv"])
    except BaseException:  # noqa: BLE001  (the child must never return into the waiting loop)
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _fresh_random_state() -> None:
    """Reseed what a fresh interpreter would seed from the OS (Python's `random` reseeds itself after fork)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def serve(exercise: str) -> None:
    """Import the exercise's checks, then fork one child per request until stdin closes."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the imports print goes to stderr, never into the replies
    import importlib

    from grader import child  # noqa: F401  (the child needs it; importing it here is part of the saving)

    checks = importlib.import_module(f"grader.checks.{exercise}")
    for name in getattr(checks, "PRELOAD", ()):
        importlib.import_module(name)
    replies.write(json.dumps({"ready": exercise}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(request, replies)
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    serve(sys.argv[1])
