"""Hints as data (grader/hints.toml), from a nudge to nearly the answer.

    python -m grader.hints ex02_threaded_prefetch 2     # or: make hint EX=ex02 LEVEL=2
"""

from __future__ import annotations

import sys
import tomllib
from functools import cache
from pathlib import Path

HINTS_FILE = Path(__file__).with_name("hints.toml")


@cache
def all_hints() -> dict[str, list[str]]:
    with HINTS_FILE.open("rb") as handle:
        return {name: entry["hints"] for name, entry in tomllib.load(handle).items()}


def resolve(exercise: str) -> str:
    """Full exercise name from a prefix such as 'ex02'."""
    matches = [name for name in all_hints() if name == exercise or name.startswith(exercise)]
    if len(matches) != 1:
        known = ", ".join(all_hints())
        raise SystemExit(f"unknown or ambiguous exercise {exercise!r}; choose one of: {known}")
    return matches[0]


def hint(exercise: str, level: int) -> str:
    """The hint at `level` (1 = gentlest); past the last one, the last one."""
    hints = all_hints()[resolve(exercise)]
    return hints[min(max(level, 1), len(hints)) - 1]


def first_hint(exercise: str) -> str:
    return hint(exercise, 1) if exercise in all_hints() else "read the TODOs in the exercise file."


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m grader.hints EXERCISE [LEVEL]   (e.g. ex02 2)")
    name = resolve(argv[0])
    level = int(argv[1]) if len(argv) > 1 and argv[1] else 1
    count = len(all_hints()[name])
    print(f"{name}, hint {min(level, count)} of {count}:\n  {hint(name, level)}")
    if level < count:
        print(f"(next: make hint EX={name} LEVEL={level + 1})")


if __name__ == "__main__":
    main(sys.argv[1:])
