"""What `make test-targets` proved about the timed targets, held to the code it was proved on.

A timed target is proved two ways (tests/test_graders.py): every planted slow implementation misses it, and every
correct alternative whose route could move it meets it. Those runs take minutes, one at a time, so `make test` does
not repeat them: `make test-targets` does, and writes to RECORD, for each folder it proved, a fingerprint of what the
outcome depends on: the folder's files, its exercise's grader and checks modules, every course module they import
(transitively: grader, loaderlab, solutions, data_gen), and the data generator. `make test` fails while a folder's
fingerprint differs from the record: the code changed since the proof, so the proof must be run again.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

from loaderlab.paths import REPO_ROOT

RECORD = REPO_ROOT / "tests" / "target-proofs.json"
RECORD_ENV = "LOADERLAB_RECORD_TARGET_PROOFS"  # set by `make test-targets`: a proof that passes is recorded
COURSE_PACKAGES = ("grader", "loaderlab", "solutions", "data_gen")


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
        for name in imported_modules(path.read_text()):
            if (file := module_file(name)) is not None and file not in found:
                pending.append(file)
    return found


def fingerprint(folder: Path, exercise: str) -> str:
    """A digest of what the proof of `folder` (a planted or alternative folder of `exercise`) depends on."""
    roots = [*sorted(folder.rglob("*.py")), REPO_ROOT / "grader" / "checks" / f"{exercise}.py",
             REPO_ROOT / "grader" / f"test_{exercise}.py"]
    files = course_sources(roots) | set(folder.rglob("*.toml")) | set((REPO_ROOT / "data_gen").rglob("*.py"))
    digest = hashlib.sha1()
    for path in sorted(files):
        digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def read_record() -> dict[str, str]:
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {}


def proof_key(folder: Path) -> str:
    return folder.relative_to(REPO_ROOT).as_posix()


def record_proof(folder: Path, exercise: str) -> None:
    """Under `make test-targets`, write that `folder`'s proof passed on the code as it is now."""
    if not os.environ.get(RECORD_ENV):
        return
    record = read_record() | {proof_key(folder): fingerprint(folder, exercise)}
    RECORD.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
