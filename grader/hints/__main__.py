"""python -m grader.hints EXERCISE [LEVEL] [CHECK]: print one hint (make hint EX=ex02 LEVEL=2 [CHECK=name]).

Without CHECK, the exercise's climbing hints; with it, that check's own levels (the grade summary names the check).
"""

from __future__ import annotations

import sys

from grader.hints import all_hints, check_hint, check_hints, hint, resolve


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m grader.hints EXERCISE [LEVEL] [CHECK]   (e.g. ex02 2)")
    name = resolve(argv[0])
    level = int(argv[1]) if len(argv) > 1 and argv[1] else 1
    check = argv[2] if len(argv) > 2 and argv[2] else ""
    if check:
        text, count, about, more = check_hint(name, check, level), len(check_hints(name).get(check, [])), \
            f"check {check}, ", f" CHECK={check}"
    else:
        text, count, about, more = hint(name, level), len(all_hints()[name]), "", ""
    print(f"{name}, {about}hint {min(max(level, 1), count)} of {count}:\n  {text}")
    if level < count:
        print(f"(next: make hint EX={name[:4]}{more} LEVEL={max(level, 1) + 1})")


main(sys.argv[1:])
