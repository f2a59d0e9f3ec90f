"""python -m grader.hints EXERCISE [LEVEL]: print one hint (make hint EX=ex02 LEVEL=2)."""

from __future__ import annotations

import sys

from grader.hints import all_hints, hint, resolve


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m grader.hints EXERCISE [LEVEL]   (e.g. ex02 2)")
    name = resolve(argv[0])
    level = int(argv[1]) if len(argv) > 1 and argv[1] else 1
    count = len(all_hints()[name])
    print(f"{name}, hint {min(level, count)} of {count}:\n  {hint(name, level)}")
    if level < count:
        print(f"(next: make hint EX={name} LEVEL={level + 1})")


main(sys.argv[1:])
