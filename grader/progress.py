"""python -m grader.progress [--results PATH]: where you are in the course (make progress).

Every module, exercise and graded step with its status from your saved results (`.grader/results.json`,
written by `pytest grader/`), in the grader's own vocabulary (`grader.results`: "done" only when every check was
graded and passed; "correct here, GPU part not graded" with the reason when checks were skipped on this machine),
the next thing to do with the command that does it, and "N of M done". Nothing is run or timed: it only reads what
the grader saved.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.catalog import Check, Exercise, exercises
from grader.results import (CORRECT_HERE, DONE, NOT_GRADED, NOT_STARTED, PASS, SKIPPED, CheckResult, read_results,
                            saved_results, short_reason, status_of)
from loaderlab.paths import GRADER_DIR, REPO_ROOT

# A stub that is a complete program fails its checks as shipped (the capstone's script, with its planted defects):
# while the learner's file is still this frozen original, the exercise is not begun, whatever its grades say.
SHIPPED_AS = {"ex11_training_script": REPO_ROOT / "loaderlab" / "original_training_script.py"}


def saved_checks_of(entry: dict[str, Any] | None, exercise: str) -> dict[str, CheckResult]:
    """{check: its saved result} for one exercise's saved entry (nothing from an entry that is not one)."""
    return {result.check: result for result in saved_results(entry, exercise)}


def group_status(checks: list[Check] | tuple[Check, ...], saved: dict[str, CheckResult]) -> str:
    """A step's or an exercise's status from its checks' saved results, in the grader's vocabulary (a declared
    check with no saved result counts as not run); NOT_GRADED when none of them has one."""
    results = [saved[c.name] for c in checks if c.name in saved]
    if not results:
        return NOT_GRADED
    return status_of(results, {c.name: c.timed for c in checks if c.name not in saved})


def first_open_check(exercise: Exercise, saved: dict[str, CheckResult]) -> Check | None:
    """The first check, in build order, that has not passed and can be graded here (a skipped one cannot)."""
    for _, _, checks in exercise.steps():
        for check in checks:
            result = saved.get(check.name)
            if result is None or result.status not in (PASS, SKIPPED):
                return check
    return None


def untouched(exercise: Exercise, exercises_dir: Path = REPO_ROOT / "exercises") -> bool:
    """Whether the learner's file is still the complete stub as shipped (only for stubs that are complete programs)."""
    original, mine = SHIPPED_AS.get(exercise.name), exercises_dir / f"{exercise.name}.py"
    return original is not None and mine.is_file() and mine.read_bytes() == original.read_bytes()


def next_action(exercise: Exercise, saved: dict[str, CheckResult]) -> list[str]:
    """What to do next in this exercise, and the command that does it."""
    grader_file = f"grader/test_{exercise.name}.py"
    check = first_open_check(exercise, saved)
    if check is None:
        return []
    if not saved or all(r.status in (NOT_STARTED, SKIPPED) for r in saved.values()) or untouched(exercise):
        read = f"work through notebooks/{exercise.notebook}.ipynb, then " if exercise.notebook else ""
        return [f"Next: {exercise.name}: {read}fill in the TODOs of exercises/{exercise.name}.py.",
                f"  run: make watch EX={exercise.short}   (re-grades on every save; or: pytest {grader_file})"]
    where = f"step {check.step} ({check.step_title}), " if check.step else ""
    status = saved[check.name].status if check.name in saved else NOT_GRADED
    return [f"Next: {exercise.name}, {where}check `{check.name}` ({status}).",
            f"  run: make watch EX={exercise.short}   (or: pytest {grader_file}; a hint: make hint EX={exercise.short})"]


def _skipped_note(results: list[CheckResult], counted: bool = True) -> str:
    """' (N checks not graded here: why)', or ' (why)' when not `counted`, for the skipped ones among `results`."""
    skipped = [r for r in results if r.status == SKIPPED]
    reasons = "; ".join(dict.fromkeys(short_reason(r.message) for r in skipped))
    count = f"{len(skipped)} check{'s' if len(skipped) > 1 else ''} not graded here: " if counted else ""
    return f" ({count}{reasons})" if skipped else ""


def report(results: dict[str, Any]) -> list[str]:
    """The progress page as lines."""
    saved_exercises = results.get("exercises", {}) if isinstance(results.get("exercises"), dict) else {}
    learner = results.get("learner")
    lines = [f"loaderlab progress{f' for {learner}' if learner else ''}", ""]
    done = 0
    started: list[list[str]] = []   # the next action of each exercise begun and not done, in course order
    not_begun: list[list[str]] = []
    elsewhere: list[str] = []       # correct here, the rest needs another machine (a CUDA GPU)
    module = None
    for exercise in exercises():
        if exercise.module != module:
            module = exercise.module
            lines.append(f"Module {module}: notebooks/{exercise.notebook}.ipynb")
        entry = saved_exercises.get(exercise.name)
        entry = entry if isinstance(entry, dict) else None
        saved = saved_checks_of(entry, exercise.name)
        status = group_status(exercise.checks, saved)
        done += status == DONE
        when = f"  (graded {str(entry['when'])[:16].replace('T', ' ')} UTC)" if entry and entry.get("when") else ""
        note = _skipped_note(list(saved.values())) if status == CORRECT_HERE else ""
        lines.append(f"  {exercise.name:<30} {status}{note}{when}")
        for number, title, checks in exercise.steps():
            if number:
                label = f"step {number}: {title}"
                step_status = group_status(checks, saved)
                why = _skipped_note([saved[c.name] for c in checks if c.name in saved], counted=False) \
                    if step_status == SKIPPED else ""
                lines.append(f"    {label:<28} {step_status}{why}")
        if status == CORRECT_HERE and first_open_check(exercise, saved) is None:
            elsewhere.append(exercise.short)
        elif status != DONE:
            begun = status not in (NOT_GRADED, NOT_STARTED) and not untouched(exercise)
            (started if begun else not_begun).append(next_action(exercise, saved))
    total = len(exercises())
    lines += ["", f"{done} of {total} exercises done."]
    if elsewhere:
        lines.append(f"Graded as far as this machine can ({CORRECT_HERE}): {', '.join(elsewhere)}. Their other "
                     "checks need a machine with a CUDA GPU: grade them there (make grade EX=..) to make them done.")
    following = (started or not_begun or [[]])[0]
    if following:
        lines += following
    elif not elsewhere:
        lines.append("Every exercise is done. notebooks/readiness_checklist.md is what to check before a long run.")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.progress", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=GRADER_DIR / "results.json",
                        help="the results file to read (default: .grader/results.json)")
    args = parser.parse_args(argv)
    print("\n".join(report(read_results(args.results))))


if __name__ == "__main__":
    main()
