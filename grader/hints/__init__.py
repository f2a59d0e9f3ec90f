"""Hints as data, one TOML file per exercise in this folder.

Each file holds `hints`, a list that climbs from a nudge to nearly the answer
(`make hint EX=ex02 LEVEL=2`, or `python -m grader.hints ex02 2`), a `[checks]`
table with, per check, what to look at when it fails: one text, or a list of
levels that climbs the same way (`make hint EX=ex11 CHECK=<check> LEVEL=2`), and
optionally `crash`: what a crash of the grading process usually means in that
exercise. The grade summary and `make watch` show only a failed check's first
level, and the command that asks for the next one.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

HINTS_DIR = Path(__file__).parent


@cache
def _entries() -> dict[str, dict[str, Any]]:
    return {path.stem: tomllib.loads(path.read_text(encoding="utf-8")) for path in sorted(HINTS_DIR.glob("ex*.toml"))}


def all_hints() -> dict[str, list[str]]:
    """The climbing hints of every exercise."""
    return {name: entry["hints"] for name, entry in _entries().items()}


def resolve(exercise: str) -> str:
    """Full exercise name from a prefix such as 'ex02'."""
    matches = [name for name in _entries() if name == exercise or name.startswith(exercise)]
    if len(matches) != 1:
        known = ", ".join(_entries())
        raise SystemExit(f"unknown or ambiguous exercise {exercise!r}; choose one of: {known}")
    return matches[0]


def hint(exercise: str, level: int) -> str:
    """The hint at `level` (1 = gentlest); past the last one, the last one."""
    hints = all_hints()[resolve(exercise)]
    return hints[min(max(level, 1), len(hints)) - 1]


def check_hints(exercise: str) -> dict[str, list[str]]:
    """The per-check hints of an exercise (its `[checks]` table), each as its levels (one text is one level)."""
    table = _entries().get(exercise, {}).get("checks", {})
    return {check: [levels] if isinstance(levels, str) else list(levels) for check, levels in table.items()}


def check_hint(exercise: str, check: str, level: int) -> str:
    """A check's hint at `level` (1 = gentlest); past its last, its last. Unknown check: an error naming the known."""
    levels = check_hints(exercise).get(check)
    if not levels:
        known = ", ".join(check_hints(exercise)) or "none"
        raise SystemExit(f"{exercise} has no hints for a check {check!r}; checks with hints: {known}")
    return levels[min(max(level, 1), len(levels)) - 1]


def hint_for_check(exercise: str, check: str) -> str:
    """What to look at first when `check` fails: its own first level, else the exercise's first hint."""
    if check in check_hints(exercise):
        return check_hint(exercise, check, 1)
    return hint(exercise, 1) if exercise in _entries() else "read the TODOs in the exercise file."


def next_hint_command(exercise: str, check: str) -> str:
    """The command that climbs past `hint_for_check`: the check's own level 2 where it has one, else the exercise's."""
    short = exercise[:4]
    if len(check_hints(exercise).get(check, [])) > 1:
        return f"make hint EX={short} CHECK={check} LEVEL=2"
    return f"make hint EX={short} LEVEL=2"


def crash_advice(exercise: str) -> str:
    """What a crash of the grading process usually means in this exercise ('' if nothing specific)."""
    return _entries().get(exercise, {}).get("crash", "")


def next_steps(exercise: str) -> list[str]:
    """For an exercise not started yet: where it is taught and how to begin, and nothing of the answer."""
    notebook = _entries().get(exercise, {}).get("notebook")
    read = f"work through notebooks/{notebook}.ipynb, then " if notebook else ""
    return [f"Next: {exercise}. {read[:1].upper() + read[1:]}fill in the TODOs of exercises/{exercise}.py",
            f"  and grade it with: pytest grader/test_{exercise}.py"]
