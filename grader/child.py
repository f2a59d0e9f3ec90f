"""The grading child: imports the exercise from the target folder by its plain module name (so spawn-started
workers can import it too), runs the check, writes the verdict. `grader.runner` starts it and reads the verdict.

What the grader's own code prints (a check's settings, a comparison table) goes to a notes file of its own, apart
from the output of the learner's code, which is all a failure shows under "your code printed".

Spawn-started workers import this module as their main module: importing `shm_ledger` here starts the ledger of
shared-memory segments in them too.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import sys
import traceback
from functools import cache
from pathlib import Path
from typing import TextIO

from grader import shm_ledger  # noqa: F401  (importing it starts the ledger in this process and its workers)
from grader.catalog import not_gradable_here, step_of
from grader.results import BUSY_SHARE, ERROR, FAIL, NOT_STARTED, PASS, SKIPPED, Measured
from grader.support import NotGradedHere
from loaderlab.bench import Comparison
from loaderlab.paths import REPO_ROOT

START_METHOD_ENV = "LOADERLAB_START_METHOD"  # the child's default multiprocessing start method, when set
GRADER_CODE = REPO_ROOT / "grader"


@cache
def _is_grader_code(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(GRADER_CODE)


class GraderLinesApart:
    """A text stream that sends what the grader's own code writes (print() in a check, in this module) to `notes`
    and everything else (the learner's code, the libraries it calls) on to `stream`. print() is built in, so the
    frame that calls write() is the one that called print()."""

    def __init__(self, stream: TextIO, notes: TextIO) -> None:
        self._stream, self._notes = stream, notes

    def write(self, text: str) -> int:
        caller = sys._getframe(1).f_code.co_filename
        return (self._notes if _is_grader_code(caller) else self._stream).write(text)

    def flush(self) -> None:
        self._notes.flush()
        self._stream.flush()

    def __getattr__(self, name: str) -> object:  # fileno, encoding, buffer, isatty...: the stream's own
        return getattr(self._stream, name)


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
    if str(target.resolve()) not in sys.path:
        sys.path.insert(0, str(target.resolve()))
    if os.environ.get(START_METHOD_ENV):
        multiprocessing.set_start_method(os.environ[START_METHOD_ENV], force=True)
    try:
        module = importlib.import_module(exercise)
    except Exception as err:  # the learner's module failed to import: show why
        return {"status": ERROR, "message": f"importing {exercise_file} failed: {type(err).__name__}: {err}\n"
                + traceback.format_exc(limit=-3)}
    checks = importlib.import_module(f"grader.checks.{exercise}")
    if reason := not_gradable_here(exercise, check):  # its marker says so: skipped before the learner's code runs
        return {"status": SKIPPED, "message": reason}
    before_step = getattr(checks, "before_step", None)  # exercise 03: a step is "not started" while its TODO is open
    try:
        if before_step is not None:
            before_step(module, step_of(exercise, check))
        outcome = getattr(checks, check)(module)
    except NotImplementedError as err:
        return {"status": NOT_STARTED, "message": f"not started: {err or 'a TODO is still open'}"}
    except NotGradedHere as err:
        return {"status": SKIPPED, "message": str(err)}
    except AssertionError as err:
        return {"status": FAIL, "message": str(err)}
    except Exception as err:
        return {"status": ERROR, "message": f"your code raised {type(err).__name__}: {err}\n"
                + _exercise_traceback(err, exercise_file)}
    if isinstance(outcome, Comparison):
        print(outcome)
        message = "" if outcome.passed else _too_slow(outcome)
        return {"status": PASS if outcome.passed else FAIL, "message": message, "metrics": outcome.to_dict()}
    if isinstance(outcome, Measured):  # a figure against its limit: saved and shown, pass or fail
        return {"status": PASS if outcome.passed else FAIL, "message": "" if outcome.passed else outcome.failure,
                "metrics": outcome.to_dict()}
    return {"status": PASS, "message": ""}


def _too_slow(outcome: Comparison) -> str:
    text = (f"too slow: {outcome.candidate_ips:.1f} {outcome.unit}/s against the baseline's {outcome.baseline_ips:.1f}/s "
            f"is {outcome.ratio:.2f}x (the median of {outcome.rounds} rounds, which ranged {outcome.ratio_min:.2f}-"
            f"{outcome.ratio_max:.2f}x{_settled_early(outcome)}); "
            f"the target is {outcome.target:.2f}x on {outcome.cores} usable cores")
    if outcome.free_cores is None:
        return text + "."
    text += f", of which {outcome.free_cores:.1f} were free while timing (the target scales with the free ones)."
    if outcome.free_cores < BUSY_SHARE * outcome.cores:
        text += (" The machine was busy, so this ratio says less than usual: close other programs and grade "
                 "again before you change your code.")
    return text


def _settled_early(outcome: Comparison) -> str:
    planned = outcome.rounds_planned or outcome.rounds
    return f"; the other {planned - outcome.rounds} could not have changed the verdict" if planned > outcome.rounds else ""


def main(argv: list[str]) -> None:
    target, exercise, checks, verdict_file, notes_file = argv
    notes = open(notes_file, "a", buffering=1)  # line-buffered: a crash keeps the notes written before it
    sys.stdout, sys.stderr = GraderLinesApart(sys.stdout, notes), GraderLinesApart(sys.stderr, notes)
    verdicts = {}
    for check in checks.split(","):
        verdicts[check] = evaluate(Path(target), exercise, check)
        Path(verdict_file).write_text(json.dumps(verdicts))  # after each: a later crash keeps the earlier verdicts
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave at once: a leaked non-daemon thread must not keep the process (and the grade) waiting.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
