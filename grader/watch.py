"""python -m grader.watch EXERCISE: re-grade one exercise every time you save it (make watch EX=ex02).

It grades once at the start, then polls the exercise file's modification time (no extra package) and
grades again after each save: that exercise's checks only, correctness before timed ones (the grader's
order), stopping at the first failure, which it prints with its hint. Ctrl-C stops it. The results are
merged into the same file `make grade` writes (check by check: the checks after the first failure keep their last
grade), so `make progress` sees them; another --target's go to a file of its own, as with `pytest grader/`.

Options for scripts and tests: --target (the folder holding the exercise), --results, --max-gradings N
(stop after N gradings), --correctness-only (skip the timed checks).
"""

from __future__ import annotations

import argparse
import datetime
import signal
import subprocess
import sys
import time
from pathlib import Path

from grader.catalog import Exercise, find
from grader.hints import hint_for_check, next_hint_command
from grader.results import (NOT_STARTED, PASS, SKIPPED, exercise_status, read_results, results_file, saved_results,
                            short_reason)
from loaderlab.paths import REPO_ROOT

POLL_S = 0.5
SETTLE_S = 0.2     # an editor may write a file in several goes: wait until it stops changing
OUTPUT_TAIL_LINES = 25


def stamp(path: Path) -> tuple[int, int] | None:
    """What changes when the file is saved: its modification time and size (None while it is missing)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def grade_once(exercise: Exercise, target: Path, results: Path, correctness_only: bool) -> list[str]:
    """Run the exercise's checks in one pytest session (stopping at the first failure); a short report."""
    command = [sys.executable, "-m", "pytest", str(REPO_ROOT / "grader" / f"test_{exercise.name}.py"),
               "--target", str(target), "--results", str(results), "-x", "-q", "--no-header",
               "-p", "no:cacheprovider"]
    if correctness_only:
        command += ["-m", "not throughput"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 2: interrupted, 3: internal error, 4: usage error, 5: nothing collected
        tail = (done.stdout + done.stderr).rstrip().splitlines()[-OUTPUT_TAIL_LINES:]
        return [f"pytest stopped with exit code {done.returncode}:", *tail]
    return verdict(exercise, read_results(results).get("exercises", {}).get(exercise.name, {}))


def verdict(exercise: Exercise, entry: dict) -> list[str]:
    """The first failing check with its message and hint, or the exercise's status (what was not graded here, why)."""
    checks = saved_results(entry, exercise.name)
    passed = sum(c.status == PASS for c in checks)
    failing = next((c for c in checks if c.status not in (PASS, SKIPPED)), None)
    if failing is None:
        skipped = [c for c in checks if c.status == SKIPPED]
        why = "; ".join(dict.fromkeys(short_reason(c.message) for c in skipped))
        return [f"{exercise_status(exercise.name, checks)}: all {passed} graded checks pass"
                + (f"; {len(skipped)} not graded on this machine ({why})." if skipped else ".")]
    where = f"step {failing.step} ({failing.step_title}), " if failing.step else ""
    lines = [f"{passed} check(s) pass; first failing: {where}`{failing.check}` ({failing.status})"]
    lines += ["  " + line for line in failing.message.strip().splitlines()]
    if failing.status == NOT_STARTED:  # no hint yet: where it is taught and where to act, nothing of the answer
        taught = f"notebooks/{exercise.notebook}.ipynb teaches it; " if exercise.notebook else ""
        return lines + [f"  {taught}fill in the TODO named above and save."]
    lines.append(f"  hint: {hint_for_check(exercise.name, failing.check)}")
    lines.append(f"  next level: {next_hint_command(exercise.name, failing.check)}")
    return lines


def watch(exercise: Exercise, target: Path, results: Path, max_gradings: int | None = None,
          correctness_only: bool = False, poll_s: float = POLL_S) -> int:
    """Grade now and after every save, until Ctrl-C or `max_gradings`; returns how many gradings ran."""
    path = target / f"{exercise.name}.py"
    print(f"watching {path} (Ctrl-C stops)", flush=True)
    gradings = 0
    seen = stamp(path)
    try:
        while max_gradings is None or gradings < max_gradings:
            if gradings:
                while stamp(path) == seen:
                    time.sleep(poll_s)
                time.sleep(SETTLE_S)
                seen = stamp(path)
            if seen is None:
                print(f"{path} is missing; waiting for it to come back", flush=True)
                gradings += 1
                continue
            clock = datetime.datetime.now().strftime("%H:%M:%S")
            print(f"\n[{clock}] grading {exercise.name} ...", flush=True)
            for line in grade_once(exercise, target, results, correctness_only):
                print(line, flush=True)
            gradings += 1
            print(f"(waiting for the next save of {path.name}; Ctrl-C stops)", flush=True)
    except KeyboardInterrupt:
        print("\nwatch stopped.", flush=True)
    return gradings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.watch", description=__doc__.splitlines()[0])
    parser.add_argument("exercise", help="ex01 ... ex10 (a prefix of the exercise's name)")
    parser.add_argument("--target", type=Path, default=REPO_ROOT / "exercises",
                        help="folder holding the exercise module (default: exercises)")
    parser.add_argument("--results", type=Path, default=None,
                        help="where to merge the results (default: .grader/results.json for your exercises/, "
                             ".grader/targets/<folder>.json for another folder)")
    parser.add_argument("--max-gradings", type=int, default=None, help="stop after this many gradings")
    parser.add_argument("--correctness-only", action="store_true", help="skip the timed checks")
    args = parser.parse_args(argv)
    exercise = find(args.exercise)
    # Ctrl-C stops it even where it was started with SIGINT ignored (a background job, a pytest-xdist worker's child).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    target = args.target.resolve()
    results = results_file(target, args.results.resolve() if args.results else None)
    watch(exercise, target, results, args.max_gradings, args.correctness_only)


if __name__ == "__main__":
    main()
