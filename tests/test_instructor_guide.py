"""docs/instructor-guide.md keeps up with the course: every module has its objectives, every notebook its measured
run time, every exercise its row in the plan and its common failures, and the counts it quotes are the repo's."""

from __future__ import annotations

import re

from grader.catalog import exercise_names
from loaderlab.paths import REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "instructor-guide.md"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = re.search(r"^## ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + following.start()] if following else text[start:]


def test_every_module_has_objectives_and_every_notebook_a_run_time() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    notebooks = sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("[0-9]*.ipynb"))
    objectives = _section(text, "## Learning objectives per module")
    timing = _section(text, "## Timing plan")
    for notebook in notebooks:
        module = notebook.split("_", 1)[0]
        assert f"**{module} ·" in objectives, f"no learning objectives for module {module}"
        assert f"| `{notebook}` |" in timing, f"no measured run time for notebooks/{notebook}.ipynb"


def test_every_exercise_has_a_plan_row_and_its_common_failures() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    timing = _section(text, "## Timing plan")
    failures = _section(text, "## Common failures and what to say")
    for exercise in exercise_names():
        number = exercise[2:4]
        assert re.search(rf"^\| ex{number}\b|^\| ex\d\d, ex{number}\b", timing, re.M), f"no plan row for {exercise}"
        assert f"**Exercise {number}**" in failures, f"no common failures for {exercise}"


def test_the_count_of_planted_implementations_is_the_repos() -> None:
    """Quoted rounded down to tens ("at least 180"), so that a new planted folder changes the text only every ten."""
    planted = len(list((REPO_ROOT / "tests" / "planted").glob("*/expect.toml")))
    quoted = re.search(r"`tests/planted/` holds at least (\d+) wrong implementations", GUIDE.read_text(encoding="utf-8"))
    assert quoted and int(quoted.group(1)) == planted // 10 * 10, (
        f"the guide says at least {quoted and quoted.group(1)}; the repo has {planted} planted folders")
