"""Rules that hold for the whole course, checked once over every exercise and every shipped file.

- The answers are a leaf: nothing that ships to learners imports `solutions/` (an allow-list says why where it does).
- Shared code has one home, under a public name: no checks module imports another, and no course module imports
  another's `_private` name.
- Every exercise follows the one pattern (CONTRIBUTING.md): one TODO form naming the exercise and a step the grader
  has, one step number (the marker), skips only by the `cuda_only` marker, and every figure a docstring quotes held
  by a constant the check uses (`pattern_problems`, read through `grader.catalog`; shown able to fail below).
- Every exercise: each check belongs to a graded step, steps run 1, 2, ... in file order with one title each, the
  timed checks come last in their step, the hints name exactly the checks, a CUDA-only check
  is marked `cuda_only` and its planted folders say `needs = "cuda"`.
- Every planted folder replaces only public names of the solution (its seams, CONTRIBUTING.md): it imports no
  `_private` name of `solutions/`, uses none through a solution module, and overrides no `_private` method.
- Every stub imports where `solutions/` does not exist (a hand-out made by `make learner-copy`), and reads "not
  started" there (`tests/test_graders.py::test_an_untouched_stub_reads_not_started_in_a_hand_out` grades the copy).
That every check can fail is `tests/test_graders.py::test_every_check_is_proven_able_to_fail`.
"""

from __future__ import annotations

import ast
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
from loaderlab.paths import REPO_ROOT
from proofs import imported_modules  # tests/ is on sys.path (its conftest is at the root of tests/)

EXERCISES = [exercise.name for exercise in catalog.exercises()]
COMPLETE_STUBS = sorted(path.stem for path in (REPO_ROOT / "tests" / "stubs").glob("ex*.toml"))  # not "not started"
SHIPPED = ("exercises", "grader", "loaderlab", "league", "data_gen", "notebooks")
# The shipped files that may import the solutions, and why. Each also works where solutions/ is absent.
MAY_IMPORT_SOLUTIONS = {
    "league/entries.py": "the league is an application above the library: it compares the course's loaders with the "
                       "solutions where they exist, and lists them as not installed in a learner's copy",
    "league/remote.py": "the league from object storage, as league/entries.py: the solutions where they exist, "
                        "not installed in a learner's copy",
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


# The course's own packages: a private name of theirs is its module's own business. Another library's private names
# (torch.cuda._sanitizer, the standard library's _posixshmem) are that library's to keep, and not counted here.
COURSE_PACKAGES = ("exercises", "grader", "loaderlab", "league", "data_gen", "solutions")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def sharing_problems(name: str, source: str) -> list[str]:
    """What the module `name` (its path from the repository's root) imports that has no public home: another checks
    module (from a module in grader/checks), or a course module's `_private` name or private module."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:   # relative: from the module's own package
                package = Path(name).parent.parts[:len(Path(name).parent.parts) - node.level + 1]
                module = ".".join([*package, *([module] if module else [])])
            imported = [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        else:
            continue
        for dotted in imported:
            parts = dotted.split(".")
            if name.startswith("grader/checks/") and dotted.startswith("grader.checks.") and len(parts) > 2:
                problems.append(f"{name}: imports {'.'.join(parts[:3])}, another checks module")
            elif parts[0] in COURSE_PACKAGES and any(_private(part) for part in parts[1:]):
                problems.append(f"{name}: imports {dotted}, a private name of another module")
    return problems


def test_checks_share_code_through_public_homes_only() -> None:
    """Code that several places need has one home, under a public name. No module in grader/checks imports another
    checks module: what checks share lives in a module of grader/ named for its job (grader/reader_checks.py,
    remote_checks.py, state_checks.py, rank_checks.py, support.py). And no course module (exercises, grader,
    loaderlab, league, data_gen, solutions, the notebooks) imports another module's `_private` name: a name another
    module needs is public, in its one home."""
    problems = []
    for path in sorted({*shipped_files(), *(REPO_ROOT / "solutions").rglob("*.py")}):
        problems += sharing_problems(path.relative_to(REPO_ROOT).as_posix(), code_of(path))
    assert not problems, "shared code without a public home:\n" + "\n".join(problems)


@pytest.mark.parametrize("name, added", [
    ("grader/checks/ex15_exactly_once.py", "from grader.checks.ex14_remote_shards import SPLIT"),
    ("grader/checks/ex15_exactly_once.py", "from grader.checks import ex13_resumable_loading"),
    ("league/remote.py", "from league.table import _builder"),
    ("grader/checks/ex08_shards.py", "from grader.reader_checks import _private_helper"),
    ("loaderlab/storage/session.py", "from . import _internal"),
])
def test_the_sharing_scan_finds_an_added_import(name: str, added: str) -> None:
    source = (REPO_ROOT / "grader" / "checks" / "ex15_exactly_once.py").read_text(encoding="utf-8")
    assert not sharing_problems("grader/checks/ex15_exactly_once.py", source)
    assert sharing_problems(name, source + "\n" + added + "\n")


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


@pytest.mark.parametrize("exercise", EXERCISES)
def test_an_exercise_graded_against_the_s3_server_declares_it(exercise: str) -> None:
    """The catalog reads which exercises need module 10's S3 server from their grader files
    (`pytestmark = pytest.mark.usefixtures("s3_server")`): the project's tests start the server for exactly those. An
    exercise whose checks talk to a server (they import `loaderlab.storage`) must say so there."""
    checks = (REPO_ROOT / "grader" / "checks" / f"{exercise}.py").read_text(encoding="utf-8")
    talks = any(name.startswith("loaderlab.storage") for name in imported_modules(checks))
    assert catalog.find(exercise).needs_storage == talks, (
        f"{exercise}: its checks {'talk' if talks else 'do not talk'} to the S3 server; "
        f"{'declare' if talks else 'remove'} `pytest.mark.usefixtures(\"s3_server\")` in grader/test_{exercise}.py's pytestmark")


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
    sandbox_only = {check.name for check in catalog.find(exercise).checks if check.sandbox_only}
    for folder in sorted((REPO_ROOT / "tests" / "planted").glob(f"{exercise[:4]}_*/")):
        spec = tomllib.loads((folder / "expect.toml").read_text())
        checks = {spec.get(table, {}).get("check") for table in ("caught_by", "too_slow")} - {None}
        assert (spec.get("needs") == "cuda") == bool(checks & cuda_only), (
            f"{folder.name}: needs = \"cuda\" exactly when its check is CUDA-only")
        assert (spec.get("needs") == "sandbox") == bool(checks & sandbox_only), (
            f"{folder.name}: needs = \"sandbox\" exactly when its check is sandbox-only")


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


# ---- the one exercise pattern (CONTRIBUTING.md) ------------------------------------------------------------------

def pattern_problems(exercise: str, stub: str, grader: str, checks: str) -> list[str]:
    """What keeps an exercise from the one pattern, given its stub, grader file and checks module sources: the TODO
    form, steps that exist, one step number, skips only by marker, and docstring figures held by constants. Each
    problem says where, what was found and what the pattern asks."""
    grader_file, checks_module = f"grader/test_{exercise}.py", f"grader.checks.{exercise}"
    declared = catalog.read_declarations(grader)[1]
    steps = {int(check.marks["step"][0]) for check in declared if check.marks.get("step")}
    problems = catalog.todo_problems(stub, f"exercises/{exercise}.py", exercise, steps)
    for check in declared:
        where = f"{grader_file}:{check.line} ({check.name})"
        if "step" in check.repeated:
            problems.append(f"{where}: two step markers; one `@pytest.mark.step(n, title)` is its step number")
        if skips := [call for call in check.calls if "skip" in call.lower()]:
            problems.append(f"{where}: skips in its body ({', '.join(skips)}); skip only by marker: "
                            '`@pytest.mark.cuda_only` (also="<function of the checks module>" for a further condition) '
                            'or `@pytest.mark.sandbox_only`')
        held = set().union(*catalog.constants_used(checks_module, check.name).values())
        for figure in catalog.quoted_figures(check.doc):
            if not catalog.figure_held(figure, held):
                problems.append(f"{where}: its docstring quotes {figure}, which no constant that {checks_module}."
                                f"{check.name} uses holds; name the number once, beside the code that enforces it")
    for node in ast.walk(ast.parse(checks)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            decorators = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
            if any(name.split(".")[-1] == "step" for name in decorators):
                problems.append(f"{checks_module}.{node.name}: a step decorator; its step number is the grader "
                                "file's `@pytest.mark.step` alone")
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1].startswith("skip"):
            problems.append(f"{checks_module}:{node.lineno}: {ast.unparse(node.func)}(...); a check never skips "
                            "itself: mark it `cuda_only` or `sandbox_only` (grader.catalog.not_gradable_here reads the marker)")
        if isinstance(node, ast.Raise) and node.exc is not None and "NotGradedHere" in ast.unparse(node.exc):
            problems.append(f"{checks_module}:{node.lineno}: raises NotGradedHere; skip only by a marker "
                            "(`cuda_only`, `sandbox_only`)")
    module_docstring = ast.get_docstring(ast.parse(stub)) or ""
    targets = set().union(*catalog.constants_used(checks_module, *catalog.top_level_names(checks_module)).values())
    for figure in catalog.quoted_figures(module_docstring):
        if not catalog.figure_held(figure, targets):
            problems.append(f"exercises/{exercise}.py (docstring): quotes {figure}, which no constant of "
                            f"{checks_module} (or what it imports) holds")
    return problems


def _sources(exercise: str) -> dict[str, str]:
    return {"stub": (REPO_ROOT / "exercises" / f"{exercise}.py").read_text(encoding="utf-8"),
            "grader": (REPO_ROOT / "grader" / f"test_{exercise}.py").read_text(encoding="utf-8"),
            "checks": (REPO_ROOT / "grader" / "checks" / f"{exercise}.py").read_text(encoding="utf-8")}


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_exercise_follows_the_one_pattern(exercise: str) -> None:
    """CONTRIBUTING.md's pattern, held for every exercise (exercise 11's one TODO block at the top lists symptoms
    and names every step: tests/test_module_08.py holds its shape)."""
    sources = _sources(exercise)
    problems = pattern_problems(exercise, **sources)
    assert not problems, "\n".join(problems)
    named = {step for todo in catalog.read_todos(sources["stub"], exercise) for step in todo.steps}
    assert named, f"exercises/{exercise}.py: no TODO names a step"


# Today's other TODO forms (issue 34), each rejected by the pattern check with a message that names the form.
OTHER_TODO_FORMS = {
    "bare step": ("# TODO(step 5): build it\n", 'raise NotImplementedError("TODO(step 5) in exercises/{file}: it")'),
    "dash": ("# TODO(ex04-2): build it\n", 'raise NotImplementedError("TODO(ex04-2) in exercises/{file}: it")'),
    "letter and bracket": ("# TODO(ex04d) [step 2]: build it\n",
                           'raise NotImplementedError("TODO(ex04d) [step 2] in exercises/{file}: it")'),
    "no comma": ("# TODO(ex04 step 2): build it\n",
                 'raise NotImplementedError("TODO(ex04 step 2) in exercises/{file}: it")'),
    "step after": ("# TODO(ex04b), step 2 (the loader): build it\n",
                   'raise NotImplementedError("TODO(ex04b), step 2 (the loader): it in exercises/{file}")'),
    "no step": ("# TODO(ex04a): build it\n", 'raise NotImplementedError("TODO(ex04a) in exercises/{file}: it")'),
}
EXAMPLE = "ex04_fast_dataloader"


def _with_stub_todo(comment: str, raised: str) -> str:
    """Exercise 04's stub with its make_loader TODO (comment and NotImplementedError) written another way."""
    stub = _sources(EXAMPLE)["stub"]
    start = stub.index("    # TODO(ex04, step 2)")
    end = stub.index("\n", stub.index("raise NotImplementedError", start))
    return stub[:start] + "    " + comment + "    " + raised.format(file=f"{EXAMPLE}.py") + stub[end:]


def test_todays_stubs_pass_the_pattern_check() -> None:
    assert not pattern_problems(EXAMPLE, **_sources(EXAMPLE))
    several = _with_stub_todo("# TODO(ex04, steps 2, 3): build it\n",
                              'raise NotImplementedError("TODO(ex04, steps 2-3) in exercises/{file}: it")')
    assert not pattern_problems(EXAMPLE, **(_sources(EXAMPLE) | {"stub": several}))


@pytest.mark.parametrize("form", sorted(OTHER_TODO_FORMS))
def test_a_stub_in_another_todo_form_is_rejected(form: str) -> None:
    problems = pattern_problems(EXAMPLE, **(_sources(EXAMPLE) | {"stub": _with_stub_todo(*OTHER_TODO_FORMS[form])}))
    assert problems and all("is not in the form `TODO(ex04, step N)" in p for p in problems), problems
    assert all(p.startswith(f"exercises/{EXAMPLE}.py:") for p in problems), "each message says where"


def test_a_todo_naming_a_step_the_grader_lacks_or_another_exercise_is_rejected() -> None:
    for comment, expected in [("# TODO(ex04, step 9): build it\n", "names step [9], which grader/test_ex04"),
                              ("# TODO(ex05, step 2): build it\n", "names ex05, but the file is ex04's")]:
        stub = _with_stub_todo(comment, 'raise NotImplementedError("TODO(ex04, step 2) in exercises/{file}: it")')
        problems = pattern_problems(EXAMPLE, **(_sources(EXAMPLE) | {"stub": stub}))
        assert len(problems) == 1 and expected in problems[0], problems


def test_a_second_step_number_is_rejected() -> None:
    sources = _sources("ex03_process_loader")
    checks = sources["checks"].replace("\ndef batches_match_sequential_reference(",
                                       "\n@step(1)\ndef batches_match_sequential_reference(")
    problems = pattern_problems("ex03_process_loader", **(sources | {"checks": checks}))
    assert problems == ["grader.checks.ex03_process_loader.batches_match_sequential_reference: a step decorator; its "
                        "step number is the grader file's `@pytest.mark.step` alone"], problems
    grader = sources["grader"].replace("@pytest.mark.step(*ORDER)\n", "@pytest.mark.step(*ORDER)\n@pytest.mark.step(2, 'x')\n", 1)
    problems = pattern_problems("ex03_process_loader", **(sources | {"grader": grader}))
    assert len(problems) == 1 and "two step markers" in problems[0], problems


def test_an_in_body_skip_is_rejected() -> None:
    sources = _sources("ex10_gpu_decode")
    grader = sources["grader"].replace('calibrated there."""\n    grade()',
                                       'calibrated there."""\n    pytest.skip("no GPU")\n    grade()')
    assert grader != sources["grader"]
    problems = pattern_problems("ex10_gpu_decode", **(sources | {"grader": grader}))
    assert len(problems) == 1 and "skips in its body (pytest.skip); skip only by marker" in problems[0], problems
    checks = sources["checks"] + "\n\ndef _skip_without_cuda(ex):\n    raise NotGradedHere('no GPU')\n"
    problems = pattern_problems("ex10_gpu_decode", **(sources | {"checks": checks}))
    assert len(problems) == 1 and "raises NotGradedHere; skip only by a marker" in problems[0], problems


@pytest.mark.parametrize("changed, figure", [("At 2.5x", "2.5x"), ("At 0.8 levels", "0.8 levels"),
                                             ("At 40%", "40%"), ("At 7 ms", "7 ms")])
def test_a_docstring_figure_no_constant_holds_is_rejected(changed: str, figure: str) -> None:
    sources = _sources("ex13_resumable_loading")
    grader = sources["grader"].replace("At 2 ms per read", f"{changed} per read")
    assert grader != sources["grader"]
    problems = pattern_problems("ex13_resumable_loading", **(sources | {"grader": grader}))
    assert len(problems) == 1 and f"quotes {figure}, which no constant" in problems[0], problems
    stub = sources["stub"].replace("at least 3x as fast", f"at least {figure} as fast")
    assert stub != sources["stub"]
    problems = pattern_problems("ex13_resumable_loading", **(sources | {"stub": stub}))
    assert len(problems) == 1 and f"(docstring): quotes {figure}" in problems[0], problems


def test_a_figure_is_held_as_a_fraction_milliseconds_or_rounded() -> None:
    assert catalog.figure_held("30%", {0.3}) and catalog.figure_held("2 ms", {0.002})
    assert catalog.figure_held("1.85x", {24 / 13}) and not catalog.figure_held("2x", {1.5})
    assert not catalog.figure_held("0.75 levels", {0.8})


# ---- planted folders replace public seams -----------------------------------------------------------------------

PLANTED = REPO_ROOT / "tests" / "planted"


def is_private(name: str) -> bool:
    """`_name` (and `__name`), not a dunder such as `__init__`: the language's hooks are no module's own."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def from_the_solutions(node: ast.AST) -> bool:
    """Whether `node` is a `from solutions... import ...` statement."""
    return isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "solutions"


def solution_bindings(tree: ast.Module) -> set[str]:
    """The names a module binds to the solutions' modules and to what it imports from them (a star import binds the
    public top-level names of the solution's file)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {alias.asname or alias.name for alias in node.names if alias.name.split(".")[0] == "solutions"}
        elif from_the_solutions(node):
            for alias in node.names:
                if alias.name == "*":
                    bound |= {name for name in catalog.top_level_names(node.module) if not is_private(name)}
                else:
                    bound.add(alias.asname or alias.name)
    return bound


def private_replacements(source: str) -> list[str]:
    """How a planted module (Python source) reaches a private name of the solution it builds on: importing one
    (`from solutions.exNN_x import _read`), using one through a solution module or class (`honest._read`, read or
    assigned), or defining one in a subclass of a solution class (`def _range` in `class ShardIndex(Honest)`)."""
    tree = ast.parse(source)
    bound = solution_bindings(tree)
    found = []
    for node in ast.walk(tree):
        if from_the_solutions(node):
            found += [f"line {node.lineno}: imports {alias.name} from {node.module}"
                      for alias in node.names if is_private(alias.name)]
        elif isinstance(node, ast.Attribute) and is_private(node.attr) and ast.unparse(node.value) in bound:
            found.append(f"line {node.lineno}: uses {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef):
            bases = [ast.unparse(base) for base in node.bases]
            if any(base.rsplit(".", 1)[0] in bound for base in bases):   # Honest, or honest.Honest
                found += [f"line {item.lineno}: class {node.name}({', '.join(bases)}) defines {item.name}"
                          for item in node.body
                          if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and is_private(item.name)]
    return found


def test_planted_folders_replace_only_public_names_of_the_solution() -> None:
    """A planted folder swaps its defect in through the solution's public names alone: it imports no private name
    (`_x`) of `solutions/`, uses none through a solution module or class, and its subclass of a solution class
    defines no private method. The pieces a planted folder replaces are the solution's public seams, each with a
    docstring that says what it does (CONTRIBUTING.md); the solution's private names stay free to change."""
    offenders = {}
    for path in sorted(PLANTED.glob("*/*.py")):
        if found := private_replacements(path.read_text(encoding="utf-8")):
            offenders[path.relative_to(REPO_ROOT).as_posix()] = found
    assert not offenders, ("planted folders that replace a private name of the solution; give the solution a public "
                           f"seam (a method or module-level function with a docstring) and replace that: {offenders}")


@pytest.mark.parametrize("planted, reach", [
    ("from solutions.ex14_remote_shards import _where\n", "imports _where from solutions.ex14_remote_shards"),
    ("import solutions.ex15_exactly_once as honest\nhonest._helper = print\n", "uses honest._helper"),
    ("import solutions.ex15_exactly_once\nsolutions.ex15_exactly_once._helper()\n",
     "uses solutions.ex15_exactly_once._helper"),
    ("from solutions.ex13_resumable_loading import ResumableLoader as Honest\n"
     "class ResumableLoader(Honest):\n    def _order(self):\n        return []\n", "defines _order"),
    ("import solutions.ex15_exactly_once as honest\n"
     "class Transfer(honest.Transfer):\n    def _check(self):\n        pass\n", "defines _check"),
    ("from solutions.ex08_shards import *\n"
     "class ShardDataset(ShardDataset):\n    def _read(self, shard):\n        return []\n", "defines _read"),
])
def test_the_planted_scan_finds_a_private_name_replaced(planted: str, reach: str) -> None:
    found = private_replacements(planted)
    assert len(found) == 1 and reach in found[0], found


def test_the_planted_scan_allows_public_names_dunders_and_the_folders_own_names() -> None:
    planted = ("import solutions.ex13_resumable_loading as honest\n"
               "from solutions.ex13_resumable_loading import ResumableLoader as _Honest\n"
               "_order = honest.ResumableLoader.epoch_order\n"
               "class ResumableLoader(_Honest):\n"
               "    def __iter__(self):\n        return iter(self.epoch_order()[self._resume_at:])\n"
               "    def epoch_order(self):\n        return _order(self)\n"
               "class _Helper:\n    def _own(self):\n        pass\n")
    assert private_replacements(planted) == []


# ---- the README's map of the tree -------------------------------------------------------------------------------

def readme_layout_folders() -> list[str]:
    """The folders the README's "Where things live" table names in its first column."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("| folder | what | who imports it |", 1)[1].split("\n\n", 1)[0]
    return [name.rstrip("/") for row in table.splitlines()[2:] for name in re.findall(r"`([^`]+)`", row.split("|")[1])]


def test_the_readme_layout_table_matches_the_tree() -> None:
    """Every top-level folder the course tracks and every package of the library has its row, and every row names a
    folder that exists (a moved tool or a new room shows here, not in a reader's confusion)."""
    named = set(readme_layout_folders())
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60).stdout
    folders = {line.split("/", 1)[0] for line in tracked.splitlines() if "/" in line}
    rooms = {path.parent.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "loaderlab").glob("*/__init__.py")}
    assert folders | rooms <= named, f"folders without a row in the README's layout table: {sorted((folders | rooms) - named)}"
    assert all((REPO_ROOT / name).is_dir() for name in named), (
        f"rows for folders that do not exist: {sorted(n for n in named if not (REPO_ROOT / n).is_dir())}")


def test_the_library_and_the_grader_do_not_import_the_applications() -> None:
    """Arrows run down only: the library and the grader import neither the league (an application above them) nor
    the maintainers' tools in tests/ (the playbook reads the league's saved JSON instead)."""
    offenders = {}
    for path in sorted(p for folder in ("loaderlab", "grader", "data_gen") for p in (REPO_ROOT / folder).rglob("*.py")):
        above = {name for name in imported_modules(path.read_text(encoding="utf-8"))
                 if name.split(".")[0] in ("league", "tests")}
        if above:
            offenders[path.relative_to(REPO_ROOT).as_posix()] = sorted(above)
    assert not offenders, f"these import an application or a maintainers' tool: {offenders}"
