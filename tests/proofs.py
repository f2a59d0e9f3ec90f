"""What the slow proofs of the graders proved, held to the code they were proved on.

Two kinds of proof grade a folder of tests/planted/ or tests/alternatives/ (tests/test_graders.py):

- TIMED (`make test-targets`): every planted slow implementation misses its timed target, and every correct
  alternative whose route could move one meets it. One at a time, minutes.
- CORRECTNESS (`make test-proofs`): every planted wrong implementation fails the check it names, for its reason, and
  every correct alternative passes every correctness check. Minutes too, and most of `make test`'s untimed phase
  when it re-ran them all at every run, though neither they nor the code they test had changed.

A run with a kind's `env` set re-runs every proof of that kind and writes to its `path`, for each folder that passed,
a fingerprint of what the outcome depends on: the folder's files, its exercise's grader and checks modules, every
course module they import (transitively: grader, loaderlab, solutions, data_gen), the data generator, and for
CORRECTNESS also what runs the check (grader/runner.py and what it imports, tests/test_graders.py) and the lock
(requirements.txt: the libraries the checks call). `make test` does not re-run a proof whose fingerprint matches the
record; it re-runs one whose fingerprint differs (so its outcome shows), and fails it even when it passes, naming the
command that records it: a change to a check changes its fingerprint, so a check that stopped failing its planted
folder cannot land unnoticed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from loaderlab.paths import REPO_ROOT, exclusive_lock

COURSE_PACKAGES = ("grader", "loaderlab", "solutions", "data_gen")
RECORD_LOCK = REPO_ROOT / ".grader" / "proofs.lock"   # taken by every process that writes a record


def module_file(name: str) -> Path | None:
    """The course's source file of module `name`, or None if it is not the course's."""
    if name.split(".")[0] not in COURSE_PACKAGES:
        return None
    base = REPO_ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(source: str) -> set[str]:
    """The dotted names of every module `source` imports (`from a.b import c` gives a.b and a.b.c)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def course_sources(roots: list[Path]) -> set[Path]:
    """`roots` and every course source file they import, transitively."""
    found: set[Path] = set()
    pending = list(roots)
    while pending:
        path = pending.pop()
        if path in found:
            continue
        found.add(path)
        if path.suffix != ".py":
            continue
        for name in imported_modules(path.read_text()):
            if (file := module_file(name)) is not None and file not in found:
                pending.append(file)
    return found


def proof_key(folder: Path) -> str:
    return folder.relative_to(REPO_ROOT).as_posix()


@dataclass(frozen=True)
class ProofKind:
    """One kind of proof: where its record lives, what sets a recording run, the command that runs it, and what
    its outcome depends on beyond the folder and its exercise's grader."""

    path: Path
    env: str                          # set (to anything) by the command that re-runs and records every proof
    command: str                      # that command, as a message names it
    markers: str                      # pytest -m: tests/test_graders.py's tests of this kind
    also_depends_on: tuple[Path, ...]

    def fingerprint(self, folder: Path, exercise: str) -> str:
        """A digest of what the proof of `folder` (a planted or alternative folder of `exercise`, or its stub, a file)
        depends on."""
        own = sorted(folder.rglob("*.py")) if folder.is_dir() else [folder]
        roots = [*own, REPO_ROOT / "grader" / "checks" / f"{exercise}.py", REPO_ROOT / "grader" / f"test_{exercise}.py",
                 *self.also_depends_on]
        files = course_sources(roots) | set(folder.rglob("*.toml")) | set((REPO_ROOT / "data_gen").rglob("*.py"))
        digest = hashlib.sha1()
        for path in sorted(files):
            digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()[:16]

    def read(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.is_file() else {}

    @property
    def recording(self) -> bool:
        """This run re-runs every proof of this kind and records those that pass."""
        return bool(os.environ.get(self.env))

    def is_current(self, folder: Path, exercise: str) -> bool:
        """The record holds a passing proof of `folder` on the code as it is now."""
        return self.read().get(proof_key(folder)) == self.fingerprint(folder, exercise)

    def record(self, folder: Path, exercise: str) -> None:
        """Under a recording run, write that `folder`'s proof passed on the code as it is now (several test processes
        record at once: each takes its turn under a lock, and the file is replaced whole, never read half written)."""
        if not self.recording:
            return
        RECORD_LOCK.parent.mkdir(exist_ok=True)
        with exclusive_lock(RECORD_LOCK):
            record = self.read() | {proof_key(folder): self.fingerprint(folder, exercise)}
            written = self.path.with_suffix(".json.part")
            written.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
            os.replace(written, self.path)

    def stale(self, folder: Path) -> str:
        """What a proof that differs from the record says: which folder, and how to record it."""
        return (f"{proof_key(folder)}, its exercise's grader or checks, or a course module they import changed since "
                f"its proof was recorded in {self.path.name}. Run `{self.command}`, or this proof alone (`{self.env}=1 "
                f"LOADERLAB_PROFILE=ci pytest tests/test_graders.py -m '{self.markers}' -k {folder.stem}`), and commit {self.path.name}.")


TIMED = ProofKind(REPO_ROOT / "tests" / "target-proofs.json", "LOADERLAB_RECORD_TARGET_PROOFS", "make test-targets",
                  "target_proof", ())
CORRECTNESS = ProofKind(REPO_ROOT / "tests" / "correctness-proofs.json", "LOADERLAB_RECORD_CORRECTNESS_PROOFS",
                        "make test-proofs", "correctness_proof",
                        (REPO_ROOT / "grader" / "runner.py", REPO_ROOT / "tests" / "test_graders.py",
                         REPO_ROOT / "requirements.txt"))
