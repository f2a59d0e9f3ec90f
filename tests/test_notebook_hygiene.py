"""Notebooks are committed clean: no outputs, one shared kernelspec, valid nbformat, a stated purpose."""

from __future__ import annotations

import json

import pytest

from loaderlab.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ holds no notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path) -> None:
    notebook = json.loads(path.read_text())
    assert notebook["nbformat"] == 4
    assert notebook["metadata"].get("kernelspec") == KERNELSPEC, f"{path.name}: normalise the kernelspec to {KERNELSPEC}"
    dirty = [i for i, cell in enumerate(notebook["cells"])
             if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs or execution counts; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_goals_and_ends_with_next_steps(path) -> None:
    cells = json.loads(path.read_text())["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert "What you will learn" in "".join(markdown[:2]), f"{path.name}: open with 'What you will learn'"
    tail = "".join(markdown[-3:])
    assert "- [ ]" in tail and "Next" in tail, f"{path.name}: end with a checklist and what to do next"
