"""Course-wide text that must stay true: errata fixed outside any one module."""

from __future__ import annotations

import re

from loaderlab.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def test_readme_says_what_shared_memory_saves_and_what_it_does_not() -> None:
    """Issue 12, erratum 7: shared memory saves the pickling and the pipe; the copies into and out of the slot remain."""
    assert not re.search(r"shared memory avoids copies", README, re.IGNORECASE)
    assert "the pickling" in README and "not the copies" in README


def test_readme_module_table_names_every_notebook_and_exercise() -> None:
    """Every notebook and every exercise appears in the README's module table."""
    table = README[README.index("## The modules"):README.index("## The dataset")]
    for notebook in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        assert f"`{notebook.stem}`" in table, f"README's module table lacks {notebook.stem}"
    for exercise in sorted((REPO_ROOT / "exercises").glob("ex*.py")):
        assert exercise.stem[:4] in table, f"README's module table lacks {exercise.stem}"


def test_readiness_checklist_points_only_at_modules_that_exist() -> None:
    checklist = (REPO_ROOT / "notebooks" / "readiness_checklist.md").read_text()
    modules = {p.stem.split("_")[0] for p in (REPO_ROOT / "notebooks").glob("*.ipynb")}
    for group in re.findall(r"\(((?:\d\d[a-z]?(?:, )?)+)(?:, exercise \d\d)?(?:[:;][^)]*)?\)", checklist):
        for module in group.split(", "):
            assert module in modules, f"readiness_checklist.md points at module {module}, which has no notebook"


def test_each_exercise_names_the_notebook_that_teaches_it() -> None:
    """`make progress`, `make watch` and the hints send a learner to this notebook: it must be the one that teaches it."""
    for hints_file in sorted((REPO_ROOT / "grader" / "hints").glob("ex*.toml")):
        notebook = re.search(r'^notebook = "([^"]+)"', hints_file.read_text(), re.M)
        assert notebook, f"{hints_file.name}: no `notebook = ...`"
        path = REPO_ROOT / "notebooks" / f"{notebook.group(1)}.ipynb"
        assert path.is_file() and hints_file.stem in path.read_text(), f"{hints_file.name}: {path.name} does not teach it"


def test_every_image_decoding_exercise_quotes_the_file_kinds_contract() -> None:
    """Issue 33, section 5: one sentence, written once (loaderlab.images.FILE_KINDS_CONTRACT), in the contract of every
    exercise that decodes images (the capstone's original script is its stub: tests/test_module_08.py)."""
    from loaderlab.images import FILE_KINDS_CONTRACT

    def words(text: str) -> str:
        return " ".join(text.replace('"""', " ").split())

    for name in ("ex01_profile_and_fix", "ex03_process_loader", "ex04_fast_dataloader", "ex07_tfdata_pipeline",
                 "ex08_shards", "ex10_gpu_decode", "ex11_training_script"):
        stub = (REPO_ROOT / "exercises" / f"{name}.py").read_text()
        docstring = stub[:stub.index('"""', 3)]
        assert words(FILE_KINDS_CONTRACT) in words(docstring), f"{name}'s contract does not quote FILE_KINDS_CONTRACT"
