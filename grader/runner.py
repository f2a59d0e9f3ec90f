"""Runs one check of one exercise in a fresh Python process, with a time limit.

Parent side: `run_check(...)` starts `python -m grader.runner ...`, kills the whole
process group if it runs past its limit, and reads the child's JSON verdict.
Child side: imports the exercise from the target folder by its plain module name
(so spawn-started workers can import it too), runs the check, writes the verdict.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from grader.results import ERROR, FAIL, NOT_STARTED, PASS, TIMEOUT, CheckResult
from loaderlab.bench import Comparison
from loaderlab.paths import REPO_ROOT

OUTPUT_TAIL_CHARS = 2000
START_METHOD_ENV = "LOADERLAB_START_METHOD"  # the child's default multiprocessing start method, when set


def run_check(target: Path, exercise: str, check: str, timeout_s: float, start_method: str | None = None) -> CheckResult:
    """Run `grader.checks.<exercise>.<check>` against `<target>/<exercise>.py` in a new process.

    `start_method` ("fork", "spawn", "forkserver") becomes the child's default way to start worker
    processes, so every loader that does not choose one itself is graded under it.
    """
    with tempfile.TemporaryDirectory(prefix="loaderlab-grade-") as tmp:
        verdict_file = Path(tmp) / "verdict.json"
        env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        if start_method:
            env[START_METHOD_ENV] = start_method
        command = [sys.executable, "-m", "grader.runner", str(target), exercise, check, str(verdict_file)]
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return CheckResult(
                exercise, check, TIMEOUT,
                f"did not finish within {timeout_s:.0f} s and was stopped. A blocking wait with no "
                "timeout is the usual cause: queue.get() or join() on a worker that died or was never "
                "told to stop, or a producer blocked on a full queue after the consumer left.",
                time.perf_counter() - start, output=_tail(output),
            )
        seconds = time.perf_counter() - start
        if not verdict_file.exists():
            return CheckResult(exercise, check, ERROR,
                               f"the grading process exited with code {process.returncode} before giving a verdict "
                               "(a crash, os._exit or a killed process).", seconds, output=_tail(output))
        verdict = json.loads(verdict_file.read_text())
        return CheckResult(exercise, check, verdict["status"], verdict["message"], seconds,
                           verdict.get("metrics"), _tail(output) if verdict["status"] != PASS else "")


def _tail(output: bytes | None) -> str:
    return (output or b"").decode(errors="replace")[-OUTPUT_TAIL_CHARS:]


def _exercise_traceback(err: BaseException, exercise_file: Path) -> str:
    """Only the frames in the learner's file: the part worth reading."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if Path(f.filename).resolve() == exercise_file]
    return "".join(traceback.format_list(frames[-4:]))


def evaluate(target: Path, exercise: str, check: str) -> dict[str, object]:
    """Import the exercise, run the check, and say what happened (child side)."""
    exercise_file = (target / f"{exercise}.py").resolve()
    if not exercise_file.is_file():
        return {"status": ERROR, "message": f"MISSING FILE: {exercise_file} does not exist. Did you rename or move it? "
                f"Restore it with `git checkout -- {exercise_file.relative_to(REPO_ROOT) if exercise_file.is_relative_to(REPO_ROOT) else exercise_file}`."}
    sys.path.insert(0, str(target.resolve()))
    if os.environ.get(START_METHOD_ENV):
        multiprocessing.set_start_method(os.environ[START_METHOD_ENV], force=True)
    try:
        module = importlib.import_module(exercise)
    except Exception as err:  # the learner's module failed to import: show why
        return {"status": ERROR, "message": f"importing {exercise_file} failed: {type(err).__name__}: {err}\n"
                + traceback.format_exc(limit=-3)}
    check_function = getattr(importlib.import_module(f"grader.checks.{exercise}"), check)
    try:
        outcome = check_function(module)
    except NotImplementedError as err:
        return {"status": NOT_STARTED, "message": f"not started: {err or 'a TODO is still open'}"}
    except AssertionError as err:
        return {"status": FAIL, "message": str(err)}
    except Exception as err:
        return {"status": ERROR, "message": f"your code raised {type(err).__name__}: {err}\n"
                + _exercise_traceback(err, exercise_file)}
    if isinstance(outcome, Comparison):
        print(outcome)
        message = "" if outcome.passed else (
            f"too slow: {outcome.candidate_ips:.1f} {outcome.unit}/s against the baseline's {outcome.baseline_ips:.1f}/s "
            f"is {outcome.ratio:.2f}x (rounds ranged {outcome.ratio_min:.2f}-{outcome.ratio_max:.2f}x); "
            f"the target is {outcome.target:.2f}x on {outcome.cores} usable cores.")
        return {"status": PASS if outcome.passed else FAIL, "message": message, "metrics": outcome.to_dict()}
    return {"status": PASS, "message": ""}


def main(argv: list[str]) -> None:
    target, exercise, check, verdict_file = argv
    verdict = evaluate(Path(target), exercise, check)
    Path(verdict_file).write_text(json.dumps(verdict))
    sys.stdout.flush()
    # Leave at once: a leaked non-daemon thread must not keep the process (and the grade) waiting.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
