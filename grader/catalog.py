"""What the course holds, read from the grader itself: each exercise, its steps and checks, where it is taught.

The grader's test files are the one source of truth: a check is a `test_<check>` function there, its step is
its `step` marker, a timed check carries `throughput`, and one marked `cuda_only` runs only where there is a
CUDA GPU (the grader's conftest skips it elsewhere, with the reason). Progress, watch mode and the instructor's
scoreboard all read this catalogue.
"""

from __future__ import annotations

import importlib
import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from grader.hints import HINTS_DIR
from loaderlab.paths import REPO_ROOT

GRADER_PACKAGE = REPO_ROOT / "grader"


@dataclass(frozen=True)
class Check:
    """One check as its grader file declares it."""

    name: str
    step: int
    step_title: str
    timed: bool
    cuda_only: bool


@dataclass(frozen=True)
class Exercise:
    """One exercise: its module name (e.g. ex02_threaded_prefetch), the notebook that teaches it, its checks."""

    name: str
    notebook: str
    checks: tuple[Check, ...]

    @property
    def short(self) -> str:
        """The name learners type: ex02."""
        return self.name[:4]

    @property
    def module(self) -> str:
        """The course module that teaches it: the notebook's number (01, 04b, ...)."""
        return self.notebook.split("_", 1)[0] if self.notebook else "?"

    def steps(self) -> list[tuple[int, str, list[Check]]]:
        """(number, title, checks) per graded step, in the order a learner builds them."""
        grouped: dict[tuple[int, str], list[Check]] = {}
        for check in self.checks:
            grouped.setdefault((check.step, check.step_title), []).append(check)
        return [(number, title, members) for (number, title), members in sorted(grouped.items())]


def _marks(function: Any) -> dict[str, Any]:
    return {mark.name: mark for mark in getattr(function, "pytestmark", [])}


def _checks_of(exercise: str) -> tuple[Check, ...]:
    module = importlib.import_module(f"grader.test_{exercise}")
    checks = []
    for name, function in vars(module).items():
        if not (name.startswith("test_") and callable(function)):
            continue
        marks = _marks(function)
        step = marks.get("step")
        checks.append(Check(name=name.removeprefix("test_"),
                            step=int(step.args[0]) if step else 0,
                            step_title=str(step.args[1]) if step else "",
                            timed="throughput" in marks,
                            cuda_only="cuda_only" in marks))
    return tuple(checks)


def _notebook_of(exercise: str) -> str:
    hints = HINTS_DIR / f"{exercise}.toml"
    return tomllib.loads(hints.read_text(encoding="utf-8")).get("notebook", "") if hints.is_file() else ""


def exercise_names() -> list[str]:
    """Every exercise that has a grader file, in course order, read from the file names (nothing imported)."""
    return sorted(path.stem.removeprefix("test_") for path in GRADER_PACKAGE.glob("test_ex*.py"))


@cache
def exercises() -> tuple[Exercise, ...]:
    """Every exercise that has a grader file, in course order."""
    return tuple(Exercise(name, _notebook_of(name), _checks_of(name)) for name in exercise_names())


def find(exercise: str) -> Exercise:
    """The exercise named exactly or by a prefix such as 'ex02'; SystemExit naming the choices otherwise."""
    matches = [e for e in exercises() if e.name == exercise or e.name.startswith(exercise)]
    if len(matches) != 1 or not exercise:
        raise SystemExit(f"unknown or ambiguous exercise {exercise!r}; choose one of: "
                         + ", ".join(e.short for e in exercises()))
    return matches[0]
