"""python -m grader.progress [--results PATH]: where you are in the course (make progress).

Every module, exercise and graded step with its status from your saved results (`.grader/results.json`,
written by `pytest grader/`), the next thing to do with the command that does it, and "N of M done".
Nothing is run or timed: it only reads what the grader saved.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.catalog import Check, Exercise, exercises
from grader.results import NOT_STARTED, NOT_TIMED, PASS, read_results
from loaderlab.paths import GRADER_DIR, REPO_ROOT

NOT_GRADED = "not graded yet"
DONE = "done"
# A stub that is a complete program fails its checks as shipped (the capstone's script, with its planted defects):
# while the learner's file is still this frozen original, the exercise is not begun, whatever its grades say.
SHIPPED_AS = {"ex11_training_script": REPO_ROOT / "loaderlab" / "original_training_script.py"}


def check_statuses(entry: dict[str, Any] | None) -> dict[str, str]:
    """{check: saved status} for one exercise's saved entry (nothing from an entry that is not one)."""
    checks = entry.get("checks") if isinstance(entry, dict) else None
    return {c.get("check", ""): c.get("status", "") for c in checks if isinstance(c, dict)} if isinstance(checks, list) else {}


def group_status(checks: list[Check] | tuple[Check, ...], saved: dict[str, str]) -> str:
    """A step's or an exercise's status from its checks' saved statuses.

    Done when every check passed, CUDA-only checks that did not run (no GPU here) aside.
    """
    statuses = [saved.get(c.name) for c in checks]
    if not any(statuses):
        return NOT_GRADED
    if all(s == PASS or (s is None and c.cuda_only) for c, s in zip(checks, statuses)):
        return DONE
    if all(s in (NOT_STARTED, None) for s in statuses):
        return NOT_STARTED
    if all(s in (PASS, NOT_TIMED) or (s is None and c.timed) for c, s in zip(checks, statuses)):
        return "not timed yet"
    if any(s is None for s in statuses) and all(s in (PASS, None) for s in statuses):
        return "part graded"
    return "in progress"


def first_open_check(exercise: Exercise, saved: dict[str, str]) -> Check | None:
    """The first check, in build order, that has not passed (a CUDA-only check not run here does not count)."""
    for _, _, checks in exercise.steps():
        for check in checks:
            status = saved.get(check.name)
            if status != PASS and not (status is None and check.cuda_only):
                return check
    return None


def untouched(exercise: Exercise, exercises_dir: Path = REPO_ROOT / "exercises") -> bool:
    """Whether the learner's file is still the complete stub as shipped (only for stubs that are complete programs)."""
    original, mine = SHIPPED_AS.get(exercise.name), exercises_dir / f"{exercise.name}.py"
    return original is not None and mine.is_file() and mine.read_bytes() == original.read_bytes()


def next_action(exercise: Exercise, saved: dict[str, str]) -> list[str]:
    """What to do next in this exercise, and the command that does it."""
    grader_file = f"grader/test_{exercise.name}.py"
    check = first_open_check(exercise, saved)
    if check is None:
        return []
    if not saved or all(s == NOT_STARTED for s in saved.values()) or untouched(exercise):
        read = f"work through notebooks/{exercise.notebook}.ipynb, then " if exercise.notebook else ""
        return [f"Next: {exercise.name}: {read}fill in the TODOs of exercises/{exercise.name}.py.",
                f"  run: make watch EX={exercise.short}   (re-grades on every save; or: pytest {grader_file})"]
    where = f"step {check.step} ({check.step_title}), " if check.step else ""
    status = saved.get(check.name) or "not graded yet"
    return [f"Next: {exercise.name}, {where}check `{check.name}` ({status}).",
            f"  run: make watch EX={exercise.short}   (or: pytest {grader_file}; a hint: make hint EX={exercise.short})"]


def report(results: dict[str, Any]) -> list[str]:
    """The progress page as lines."""
    saved_exercises = results.get("exercises", {}) if isinstance(results.get("exercises"), dict) else {}
    learner = results.get("learner")
    lines = [f"loaderlab progress{f' for {learner}' if learner else ''}", ""]
    done = 0
    started: list[list[str]] = []   # the next action of each exercise begun and not done, in course order
    not_begun: list[list[str]] = []
    module = None
    for exercise in exercises():
        if exercise.module != module:
            module = exercise.module
            lines.append(f"Module {module}: notebooks/{exercise.notebook}.ipynb")
        entry = saved_exercises.get(exercise.name)
        entry = entry if isinstance(entry, dict) else None
        saved = check_statuses(entry)
        status = group_status(exercise.checks, saved)
        done += status == DONE
        when = f"  (graded {str(entry['when'])[:16].replace('T', ' ')} UTC)" if entry and entry.get("when") else ""
        lines.append(f"  {exercise.name:<30} {status}{when}")
        for number, title, checks in exercise.steps():
            if number:
                cuda = " (no CUDA GPU here: skipped)" if all(c.cuda_only for c in checks) and not any(
                    saved.get(c.name) for c in checks) and saved else ""
                label = f"step {number}: {title}"
                lines.append(f"    {label:<28} {group_status(checks, saved)}{cuda}")
        if status != DONE:
            begun = status not in (NOT_GRADED, NOT_STARTED) and not untouched(exercise)
            (started if begun else not_begun).append(next_action(exercise, saved))
    total = len(exercises())
    lines += ["", f"{done} of {total} exercises done."]
    lines += (started or not_begun or [[]])[0] or ["Every exercise is done. notebooks/readiness_checklist.md is what to check before a long run."]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.progress", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=GRADER_DIR / "results.json",
                        help="the results file to read (default: .grader/results.json)")
    args = parser.parse_args(argv)
    print("\n".join(report(read_results(args.results))))


if __name__ == "__main__":
    main()
