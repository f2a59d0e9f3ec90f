"""python -m grader.learner_copy DEST: the course as learners get it, without the answers (make learner-copy DEST=...).

Copies the files git tracks, leaving out `solutions/`, the project's own tests (`tests/`: they prove the
course against the solutions and hold the planted wrong implementations and the correct alternatives,
which are answers too) and `.ci/`. The copy keeps the notebooks, the stubs, the grader and its hints, so
it grades as the course does: an untouched stub reads "not started". It records the course's commit in
COURSE_COMMIT (saved with every grade) and, where git is installed, starts its own repository there with
that state tagged `course-start`, which `make reset` restores stubs from.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

from grader.results import course_commit
from grader.reset import START_TAG
from loaderlab.paths import REPO_ROOT

LEFT_OUT = ("solutions/", "tests/", ".ci/")


def course_files(root: Path = REPO_ROOT) -> list[str]:
    """The tracked files of the course (relative paths) a learner gets."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=60)
    if listed.returncode != 0:
        raise SystemExit(f"learner-copy needs a git checkout of the course at {root}: "
                         f"{listed.stderr.decode().strip()}")
    return [name for name in listed.stdout.decode().split("\0")
            if name and not name.startswith(LEFT_OUT) and (root / name).is_file()]


def write_copy(dest: Path, root: Path = REPO_ROOT) -> int:
    """Write the learner copy into `dest` (new or empty); returns how many files it holds."""
    if dest.resolve() == root.resolve() or dest.resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"{dest} is inside the course; choose a folder outside {root}")
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"{dest} is not empty; choose a new folder")
    edited = subprocess.run(["git", "status", "--porcelain", "--", "exercises"], cwd=root, capture_output=True,
                            text=True, timeout=60).stdout.strip()
    if edited:
        raise SystemExit(f"exercises/ differs from the course's stubs (someone's work?):\n{edited}\n"
                         "a learner copy must hold the stubs: `make reset-all` first, or copy from a fresh clone.")
    files = course_files(root)
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    commit = course_commit()
    (dest / "COURSE_COMMIT").write_text(f"{commit or 'unknown'}\n")
    _start_repository(dest, commit)
    return len(files)


def _start_repository(dest: Path, commit: str | None) -> None:
    """git init + one commit tagged course-start, so that reset has the stubs; skipped without git."""
    steps = [["init", "-q"], ["add", "-A"],
             ["-c", "user.name=loaderlab", "-c", "user.email=loaderlab@localhost", "commit", "-q", "-m",
              f"loaderlab course at {commit or 'an unknown commit'}, learner copy (no solutions)"],
             ["tag", START_TAG]]
    for step in steps:
        try:
            done = subprocess.run(["git", *step], cwd=dest, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            print("git is not available: the copy has no repository, so `make reset` cannot restore stubs there.")
            return
        if done.returncode != 0:
            print(f"git {step[0]} failed in {dest} ({done.stderr.decode().strip()}); the copy has no course-start tag.")
            return


# For testing a hand-out with this checkout's venv: the venv's editable install would find this checkout's packages
# (solutions/ among them) before the copy's, so a sitecustomize in the copy removes its finder from every process.
HIDE_THE_CHECKOUT = """import sys
sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in str(getattr(finder, "__module__", ""))
                    and "__editable__" not in type(finder).__module__]
"""


def hand_out_for_testing(dest: Path, reuse: bool = False) -> dict[str, str]:
    """A hand-out in `dest` as `make learner-copy` writes it (unless `reuse` and it is there), with this checkout's
    data/ linked in, and the environment in which only the hand-out is importable: its processes, their workers and
    notebook kernels see the copy's packages, never this checkout's (so a stray import of solutions/ fails there as
    it does for a learner). `make test` grades the stubs and runs the notebooks in one."""
    if not (reuse and (dest / "COURSE_COMMIT").is_file()):
        write_copy(dest)
        if (REPO_ROOT / "data").is_dir():
            (dest / "data").symlink_to(REPO_ROOT / "data", target_is_directory=True)
        (dest / ".isolate").mkdir()
        (dest / ".isolate" / "sitecustomize.py").write_text(HIDE_THE_CHECKOUT)
    return os.environ | {"PYTHONPATH": os.pathsep.join([str(dest / ".isolate"), str(dest)]), "PYTHONNOUSERSITE": "1"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.learner_copy", description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="a new or empty folder outside the course")
    parser.add_argument("--for-testing", action="store_true",
                        help="also link data/ and hide this checkout from this venv in the copy (make test); prints "
                             "the PYTHONPATH to run the copy with")
    args = parser.parse_args(argv)
    if args.for_testing:
        print(hand_out_for_testing(args.dest)["PYTHONPATH"])
        return
    count = write_copy(args.dest)
    print(f"wrote {count} files to {args.dest} (no {', '.join(LEFT_OUT)}). Learners run `make lab` there; "
          "`make grade` grades their exercises/.")


if __name__ == "__main__":
    main()
