"""python -m grader.reset EXERCISE | --all [--yes]: put an exercise's stub back and forget its grades.

(make reset EX=ex02, make reset-all.) The stub comes from git, byte for byte: the commit tagged
`course-start` where there is one (a learner copy made with `make learner-copy` has it, so your own
commits never become "the stub"), else HEAD. It asks before overwriting your work; --yes skips the
question (for scripts and tests). The exercise's saved results are removed from .grader/results.json.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from grader.catalog import Exercise, exercises, find
from grader.results import forget
from loaderlab.paths import GRADER_DIR, REPO_ROOT

START_TAG = "course-start"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30)


def stub_source(root: Path = REPO_ROOT) -> str:
    """The git revision the stubs come from; SystemExit when this folder is not a git checkout of the course."""
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError) as error:
        raise SystemExit(f"reset needs git to restore the stubs, and git could not run: {error}") from None
    if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != root.resolve():
        raise SystemExit(f"{root} is not a git checkout of the course, so there is no pristine stub to restore; "
                         "copy the exercise's file from a fresh copy of the course instead.")
    return START_TAG if _git(root, "rev-parse", "--quiet", "--verify", f"{START_TAG}^{{commit}}").returncode == 0 else "HEAD"


def stub_bytes(exercise: Exercise, revision: str, root: Path = REPO_ROOT) -> bytes:
    """The exercise's stub exactly as the course ships it."""
    shown = _git(root, "show", f"{revision}:exercises/{exercise.name}.py")
    if shown.returncode != 0:
        raise SystemExit(f"git has no exercises/{exercise.name}.py at {revision}: {shown.stderr.decode().strip()}")
    return shown.stdout


def confirm(question: str) -> bool:
    """Ask on the terminal; no terminal (a script) means no, unless the caller passed --yes."""
    if not sys.stdin.isatty():
        print(f"{question} [y/N] no terminal to answer on; pass --yes to reset without asking.")
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def reset(chosen: list[Exercise], results: Path, assume_yes: bool = False, root: Path = REPO_ROOT) -> bool:
    """Restore the stubs of `chosen` under `root` and forget their results; False if the learner said no."""
    revision = stub_source(root)
    stubs = {exercise: stub_bytes(exercise, revision, root) for exercise in chosen}
    changed = [e for e, stub in stubs.items() if _current(root / "exercises" / f"{e.name}.py") != stub]
    names = ", ".join(e.short for e in chosen)
    if changed and not assume_yes:
        files = ", ".join(f"exercises/{e.name}.py" for e in changed)
        if not confirm(f"Reset {files} to the stub? Your work in {'them' if len(changed) > 1 else 'it'} will be lost."):
            print("Nothing reset.")
            return False
    for exercise in changed:
        (root / "exercises" / f"{exercise.name}.py").write_bytes(stubs[exercise])
    forgotten = forget(results, [e.name for e in chosen]) if results.exists() else []
    print(f"Reset {names}: {len(changed)} file(s) restored from {revision}, "
          f"saved results cleared for {len(forgotten)} exercise(s).")
    return True


def _current(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.reset", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("exercise", nargs="?", help="ex01 ... ex10 (a prefix of the exercise's name)")
    which.add_argument("--all", action="store_true", help="every exercise")
    parser.add_argument("--yes", action="store_true", help="do not ask")
    parser.add_argument("--results", type=Path, default=GRADER_DIR / "results.json",
                        help="the results file to clear them from (default: .grader/results.json)")
    args = parser.parse_args(argv)
    chosen = list(exercises()) if args.all else [find(args.exercise)]
    if not reset(chosen, args.results, args.yes):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
