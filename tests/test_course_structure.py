"""Rules that hold for the whole course, checked once over every exercise and every shipped file.

- The answers are a leaf: nothing that ships to learners imports `solutions/` (an allow-list says why where it does).
- Every exercise: each check belongs to a graded step, steps run 1, 2, ... in file order with one title each, the
  timed checks come last in their step, the hints name exactly the checks, a CUDA-only check
  is marked `cuda_only` and its planted folders say `needs = "cuda"`.
- Every stub imports where `solutions/` does not exist (a hand-out made by `make learner-copy`), and reads "not
  started" there (`test_stubs_read_not_started_in_a_hand_out` grades the copy).
That every check can fail is `tests/test_graders.py::test_every_check_is_proven_able_to_fail`.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from grader import catalog
from grader.hints import all_hints, check_hints
from grader.learner_copy import hand_out_for_testing
from grader.results import NOT_STARTED, SKIPPED
from loaderlab.paths import REPO_ROOT

EXERCISES = [exercise.name for exercise in catalog.exercises()]
COMPLETE_STUBS = sorted(path.stem for path in (REPO_ROOT / "tests" / "stubs").glob("ex*.toml"))  # not "not started"
SHIPPED = ("exercises", "grader", "loaderlab", "league", "data_gen", "notebooks")
# The shipped files that may import the solutions, and why. Each also works where solutions/ is absent.
MAY_IMPORT_SOLUTIONS = {
    "league/entries.py": "the league is an application above the library: it compares the course's loaders with the "
                       "solutions where they exist, and lists them as not installed in a learner's copy",
    "loaderlab/tools/gpu_reference.py": "a maintainer's tool that runs a notebook on a GPU machine with the "
                                        "solutions standing in for the exercises, to measure the reference figures",
}


# Where one of them may use a helper, and why: the playbook (a learner's command) shows the doctor's report of this
# machine; a planted defect that is notebook 09's own demonstration (a count that reads the sampler, which runs ahead
# of the loop) counts with the notebook's sampler rather than a copy of it.
ALLOWED_HELPER_IMPORTS = {
    "grader/playbook.py": {"loaderlab.tools.doctor", "loaderlab.tools.doctor.TENSORFLOW",
                           "loaderlab.tools.doctor.Report", "loaderlab.tools.doctor.diagnose"},
    "tests/planted/ex13_counts_the_samplers_position/ex13_resumable_loading.py": {
        "loaderlab.lessons.m09_resume", "loaderlab.lessons.m09_resume.CountingSampler"},
}


def solutions_imports(source: str) -> list[str]:
    """Every way `source` (Python) imports `solutions`: import statements, and import_module of a literal or an
    f-string that starts with "solutions"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "solutions"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "solutions":
            found.append(node.module)
        elif (isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith("import_module")
              and _starts_with_solutions(node.args[0])):
            found.append(ast.unparse(node.args[0]))
    return found


def _starts_with_solutions(argument: ast.expr) -> bool:
    if isinstance(argument, ast.JoinedStr) and argument.values:
        argument = argument.values[0]
    return isinstance(argument, ast.Constant) and str(argument.value).split(".")[0] == "solutions"


def code_of(path: Path) -> str:
    """A module's source, or a notebook's code cells (IPython magics and shell lines left out)."""
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    return "\n".join(line for line in "\n".join(lines).splitlines() if not line.lstrip().startswith(("%", "!")))


def shipped_files(root: Path = REPO_ROOT) -> list[Path]:
    return sorted(path for folder in SHIPPED for pattern in ("*.py", "*.ipynb")
                  for path in (root / folder).rglob(pattern) if ".ipynb_checkpoints" not in path.parts)


def test_no_shipped_file_imports_the_solutions() -> None:
    offenders = {}
    for path in shipped_files():
        name = path.relative_to(REPO_ROOT).as_posix()
        if name not in MAY_IMPORT_SOLUTIONS and (found := solutions_imports(code_of(path))):
            offenders[name] = found
    assert not offenders, (f"shipped files import solutions/, which a learner's copy does not have: {offenders}. "
                           "Move what they need into loaderlab (course infrastructure), or, for an application "
                           "above the library, add it to MAY_IMPORT_SOLUTIONS with the reason.")
    assert set(MAY_IMPORT_SOLUTIONS) <= {p.relative_to(REPO_ROOT).as_posix() for p in shipped_files()}


@pytest.mark.parametrize("added", ["from solutions.ex08_shards import ShardDataset",
                                   "import solutions.ex04_fast_dataloader as reference",
                                   "    module = importlib.import_module(f'solutions.{name}')",
                                   "from solutions import ex01_profile_and_fix"])
def test_the_scan_finds_an_import_added_to_a_shipped_module(added: str) -> None:
    stub = (REPO_ROOT / "exercises" / "ex10_gpu_decode.py").read_text()
    assert not solutions_imports(stub)
    changed = stub + ("\n\ndef later(name):\n    import importlib\n" if added.startswith(" ") else "\n") + added + "\n"
    assert solutions_imports(changed)


def test_the_scan_reads_notebook_code_cells(tmp_path: Path) -> None:
    notebook = json.loads((REPO_ROOT / "notebooks" / "07_feeding_the_gpu.ipynb").read_text())
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                              "source": ["%autoreload 2\n", "from solutions.ex04_fast_dataloader import make_loader\n"]})
    path = tmp_path / "07.ipynb"
    path.write_text(json.dumps(notebook))
    assert solutions_imports(code_of(path)) == ["solutions.ex04_fast_dataloader"]


def imported_modules(source: str) -> set[str]:
    """The dotted names of every module `source` imports (`from a.b import c` gives a.b and a.b.c)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_exercises_answers_and_graders_use_the_library_not_a_lessons_helper() -> None:
    """`loaderlab/lessons/` holds one notebook's helpers and `loaderlab/tools/` commands: what the stubs, the solutions,
    the planted and correct alternatives and the graders need lives in `loaderlab` itself, so a lesson can change
    without touching them."""
    folders = ("exercises", "solutions", "grader", "tests/planted", "tests/alternatives")
    offenders = {}
    for path in sorted(p for folder in folders for p in (REPO_ROOT / folder).rglob("*.py")):
        helpers = {name for name in imported_modules(path.read_text(encoding="utf-8"))
                   if name.startswith(("loaderlab.lessons", "loaderlab.tools"))}
        if helpers - ALLOWED_HELPER_IMPORTS.get(path.relative_to(REPO_ROOT).as_posix(), set()):
            offenders[path.relative_to(REPO_ROOT).as_posix()] = sorted(helpers)
    assert not offenders, f"these import a notebook's helpers or a tool: {offenders}"


# ---- every exercise --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("exercise", EXERCISES)
def test_steps_come_in_build_order_and_each_steps_timed_checks_last(exercise: str) -> None:
    checks = catalog.find(exercise).checks
    assert all(check.step for check in checks), f"checks without @pytest.mark.step: {[c.name for c in checks if not c.step]}"
    numbers = [check.step for check in checks]
    assert numbers == sorted(numbers), "checks appear in the order of their steps"
    assert sorted(set(numbers)) == list(range(1, max(numbers) + 1)), "steps are numbered 1, 2, 3, ... without gaps"
    titles: dict[int, str] = {}
    for check in checks:
        assert titles.setdefault(check.step, check.step_title) == check.step_title, f"step {check.step} has two titles"
    assert len(set(titles.values())) == len(titles), "each step has its own title"
    for step in titles:  # a step is right before it is fast: its timed checks come after its correctness checks
        kinds = [check.timed for check in checks if check.step == step]
        assert kinds == sorted(kinds), f"step {step}: a timed check comes before a correctness check of its step"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_hints_name_every_check_and_climb(exercise: str) -> None:
    checks = {check.name for check in catalog.find(exercise).checks}
    hints = check_hints(exercise)
    assert set(hints) == checks, f"[checks] hints: missing {checks - set(hints)}, unknown {set(hints) - checks}"
    assert len(all_hints()[exercise]) >= 3, "hints climb through at least three levels"
    notebook = catalog.find(exercise).notebook
    assert (REPO_ROOT / "notebooks" / f"{notebook}.ipynb").is_file(), f"the hints name notebook {notebook!r}"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_cuda_only_checks_are_marked_and_their_planted_folders_say_so(exercise: str) -> None:
    """A check that needs a GPU carries `@pytest.mark.cuda_only` (the conftest skips it, with the reason, elsewhere),
    and a planted folder caught only by such a check says `needs = "cuda"`."""
    cuda_only = {check.name for check in catalog.find(exercise).checks if check.cuda_only}
    for folder in sorted((REPO_ROOT / "tests" / "planted").glob(f"{exercise[:4]}_*/")):
        spec = tomllib.loads((folder / "expect.toml").read_text())
        checks = {spec.get(table, {}).get("check") for table in ("caught_by", "too_slow")} - {None}
        assert (spec.get("needs") == "cuda") == bool(checks & cuda_only), (
            f"{folder.name}: needs = \"cuda\" exactly when its check is CUDA-only")


def test_a_cuda_only_check_is_skipped_with_the_reason_without_a_gpu() -> None:
    from loaderlab.device import cuda_missing_reason

    reason = cuda_missing_reason()
    if reason is None:
        pytest.skip("this machine has a CUDA GPU: nothing is skipped")
    done = subprocess.run([sys.executable, "-m", "pytest", "grader/test_ex10_gpu_decode.py", "-k",
                           "device_decode_beats_cpu_workers", "-rs", "-p", "no:cacheprovider", "--target", "solutions",
                           "--results", os.devnull], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert "1 skipped" in done.stdout and reason in " ".join(done.stdout.split()), done.stdout[-2000:]


# ---- the hand-out -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hand_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A learner's copy (`make learner-copy`) and the environment in which only it is importable. `make test` makes
    one before its first phase and names it in LOADERLAB_HANDOUT; alone, this makes its own."""
    given = os.environ.get("LOADERLAB_HANDOUT")
    dest = Path(given) if given else tmp_path_factory.mktemp("handout") / "course"
    return dest, hand_out_for_testing(dest, reuse=bool(given))


def test_complete_stubs_import_without_the_solutions(hand_out: tuple[Path, dict[str, str]]) -> None:
    """The stubs that are complete programs (tests/stubs/) are not graded in the hand-out below: they must import
    there all the same, and the hand-out must not see this checkout's solutions/."""
    dest, env = hand_out
    assert not (dest / "solutions").exists() and not (dest / "tests").exists()
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module('exercises.' + name)\n"
            "try:\n    import solutions\nexcept ModuleNotFoundError:\n    print('no solutions')\n")
    done = subprocess.run([sys.executable, "-c", code, *COMPLETE_STUBS], cwd=dest, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("no solutions"), "the hand-out must not see this checkout's solutions/"


def test_stubs_read_not_started_in_a_hand_out(hand_out: tuple[Path, dict[str, str]]) -> None:
    """Grading a hand-out's untouched stubs, as a learner would before starting: every correctness check reads "not
    started" and points at a TODO. (A stub that is a complete program with planted defects, tests/stubs/, is graded
    in the repository by tests/test_graders.py; here it must import, above.)"""
    dest, env = hand_out
    results = dest / ".grader" / "stub-grades.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "grader/", "-m", "not throughput", "-q", "-p",
                           "no:cacheprovider", "--results", str(results),
                           *(f"--ignore=grader/test_{name}.py" for name in COMPLETE_STUBS)],
                          cwd=dest, env=env, capture_output=True, text=True, timeout=900)
    assert results.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    graded = json.loads(results.read_text())["exercises"]
    assert sorted(graded) == sorted(set(EXERCISES) - set(COMPLETE_STUBS)), f"graded {sorted(graded)}"
    cuda_only = {(e, c.name) for e in graded for c in catalog.find(e).checks if c.cuda_only}
    for exercise, record in graded.items():
        for result in record["checks"]:
            if result["status"] == SKIPPED and (exercise, result["check"]) in cuda_only:
                continue  # no CUDA GPU here: skipped, with the reason, before the stub is touched
            assert result["status"] == NOT_STARTED and "TODO" in result["message"], (
                f"{exercise}.{result['check']} on the hand-out's stub: {result['status']}: {result['message'][:800]}")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_a_target_stated_in_a_checks_docstring_is_the_one_enforced(exercise: str) -> None:
    """A grader's docstrings state rules; a target they quote ("at least 1.5x") must be a constant of the checks module
    that enforces it, so the number is written once (an ex03 docstring once promised 0.6x the free cores while the
    check enforced 0.9 + 0.5 x (free - 1))."""
    tests = importlib.import_module(f"grader.test_{exercise}")
    checks = importlib.import_module(f"grader.checks.{exercise}")
    constants = {value for value in vars(checks).values() if isinstance(value, int | float) and not isinstance(value, bool)}
    for name, function in vars(tests).items():
        if name.startswith("test_") and function.__doc__:
            for quoted in re.findall(r"(?:at least|reach(?:es)?|at most) (\d+(?:\.\d+)?)x", " ".join(function.__doc__.split())):
                assert float(quoted) in constants, f"{name} quotes {quoted}x, which no constant of grader/checks/{exercise}.py holds"
