"""What the course holds, read from the grader itself: each exercise, its steps and checks, where it is taught.

The grader's test files are the one source of truth, read from their syntax (nothing imported, so it is cheap): a
check is a `test_<check>` function there, its step is its `step` marker, a timed check carries `throughput`, and
one marked `cuda_only` or `sandbox_only` runs only where it can be graded (`not_gradable_here`, read by the conftest
and by the grading child). Progress, watch mode and the instructor's scoreboard all read this catalogue. It also reads the
rest of an exercise's pattern (CONTRIBUTING.md): the stubs' TODOs and the constants a check uses, which
tests/test_course_structure.py holds every exercise to.
"""

from __future__ import annotations

import ast
import importlib
import io
import operator
import re
import tokenize
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from grader.hints import HINTS_DIR
from loaderlab.paths import REPO_ROOT

GRADER_PACKAGE = REPO_ROOT / "grader"


@dataclass(frozen=True)
class Check:
    """One check as its grader file declares it: its name and its markers, each with its literal arguments
    (step, throughput, cuda_only, spawn_covered_by, timeout_s, ...); what the course reads of them, below."""

    name: str
    # Left out of the hash and equality, so that a Check, and the Exercise holding it, can key a dict.
    marks: dict[str, tuple[Any, ...]] = field(default_factory=dict, hash=False, compare=False)

    @property
    def step(self) -> int:
        """Its graded step (`@pytest.mark.step(n, "title")`); 0 where it has none."""
        step = self.marks.get("step")
        return int(step[0]) if step else 0

    @property
    def step_title(self) -> str:
        step = self.marks.get("step", ())
        return str(step[1]) if len(step) > 1 else ""

    @property
    def timed(self) -> bool:
        """Marked `throughput`: it times, after its step's correctness checks."""
        return "throughput" in self.marks

    @property
    def cuda_only(self) -> bool:
        """Marked `cuda_only`: graded only where there is a CUDA GPU (skipped, with the reason, elsewhere)."""
        return "cuda_only" in self.marks

    @property
    def sandbox_only(self) -> bool:
        """Marked `sandbox_only`: it runs a job in the course's sandbox, graded only where one can be made (Linux)."""
        return "sandbox_only" in self.marks


@dataclass(frozen=True)
class Exercise:
    """One exercise: its module name (e.g. ex02_threaded_prefetch), the notebook that teaches it, its checks."""

    name: str
    notebook: str
    checks: tuple[Check, ...]
    starts_processes: bool  # `starts_processes` on its file (`pytestmark`) or on a check: graded under spawn too
    needs_storage: bool     # its file's `pytestmark = pytest.mark.usefixtures("s3_server")`: module 10's S3 server

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


def _checks_of(exercise: str) -> tuple[Check, ...]:
    return tuple(Check(name=check.name, marks=check.marks) for check in declared(exercise)[1])


def _notebook_of(exercise: str) -> str:
    hints = HINTS_DIR / f"{exercise}.toml"
    return tomllib.loads(hints.read_text(encoding="utf-8")).get("notebook", "") if hints.is_file() else ""


def exercise_names() -> list[str]:
    """Every exercise that has a grader file, in course order, read from the file names (nothing imported)."""
    return sorted(path.stem.removeprefix("test_") for path in GRADER_PACKAGE.glob("test_ex*.py"))


@cache
def exercises() -> tuple[Exercise, ...]:
    """Every exercise that has a grader file, in course order."""
    return tuple(Exercise(name, _notebook_of(name), _checks_of(name), _starts_processes(name),
                          "usefixtures(s3_server)" in declared(name)[0])
                 for name in exercise_names())


def _starts_processes(exercise: str) -> bool:
    """Marked `starts_processes`: on the file when its checks start worker processes, on each check that does where
    the others start none (exercise 15: its real ranks; the others run threads)."""
    file_marks, checks = declared(exercise)
    return "starts_processes" in file_marks or any("starts_processes" in check.marks for check in checks)


def find(exercise: str) -> Exercise:
    """The exercise named exactly or by a prefix such as 'ex02'; SystemExit naming the choices otherwise."""
    matches = [e for e in exercises() if e.name == exercise or e.name.startswith(exercise)]
    if len(matches) != 1 or not exercise:
        raise SystemExit(f"unknown or ambiguous exercise {exercise!r}; choose one of: "
                         + ", ".join(e.short for e in exercises()))
    return matches[0]


# ---- the exercise pattern, read from the sources (AST and text only: nothing is imported) ---------------------

# The one TODO form: `TODO(exNN, step N)`, `TODO(exNN, steps N-M)` or `TODO(exNN, steps 1, 3)`. A comment goes on
# `: <what to build and why>`; a stub's NotImplementedError reads "TODO(exNN, step N) in exercises/<file>.py: <what>".
TODO_TAG = re.compile(r"TODO\((?P<exercise>ex\d\d), (?P<steps>step \d+|steps \d+-\d+|steps \d+(?:, \d+)+)\)")
# A figure a docstring quotes with its unit: 1.5x, 0.75 levels, 30%, 200 ms, 2 s, 512 MiB, 224 px, ...
QUOTED_FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?) ?(x|×|%|levels?|ms|s|seconds|MiB|GiB|MB|KiB|px|pixels)(?!\w)")


@dataclass(frozen=True)
class Todo:
    """One TODO of a stub: where it is, the exercise and steps it names (empty where it is not in the one form)."""

    file: str
    line: int
    text: str
    exercise: str
    steps: tuple[int, ...]
    raised: bool  # the message of a NotImplementedError, rather than a comment


def todo_steps(spec: str) -> tuple[int, ...]:
    """'step 2' -> (2,), 'steps 1-3' -> (1, 2, 3), 'steps 1, 3' -> (1, 3)."""
    numbers = spec.split(" ", 1)[1]
    if "-" in numbers:
        first, last = (int(n) for n in numbers.split("-"))
        return tuple(range(first, last + 1))
    return tuple(int(n) for n in numbers.split(", "))


def _raised_messages(tree: ast.AST) -> dict[int, str]:
    """line -> the literal message of each `raise NotImplementedError("...")`."""
    found = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args
                and ast.unparse(node.exc.func) == "NotImplementedError"):
            message = node.exc.args[0]
            found[node.lineno] = message.value if isinstance(message, ast.Constant) else ast.unparse(message)
    return found


def read_todos(source: str, file: str) -> list[Todo]:
    """Every TODO of a stub's source: each comment that says TODO and each NotImplementedError message. One not in
    the one form has exercise "" and no steps."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and "TODO" in token.string:
            found.append(_todo(file, token.start[0], token.string.lstrip("# "), raised=False))
    for line, message in _raised_messages(ast.parse(source)).items():
        found.append(_todo(file, line, message, raised=True))
    return sorted(found, key=lambda todo: todo.line)


def _todo(file: str, line: int, text: str, raised: bool) -> Todo:
    tag = TODO_TAG.match(text)
    if not tag:
        return Todo(file, line, text, "", (), raised)
    return Todo(file, line, text, tag["exercise"], todo_steps(tag["steps"]), raised)


def todo_problems(source: str, file: str, exercise: str, steps: set[int]) -> list[str]:
    """What keeps a stub's TODOs from the one form: each problem says where, what was found and what is expected."""
    problems = []
    stem = Path(file).stem
    for todo in read_todos(source, file):
        where = f"{file}:{todo.line}"
        if not todo.exercise:
            problems.append(f"{where}: {todo.text[:60]!r} is not in the form `TODO({stem[:4]}, step N): <what>`"
                            + (" (a NotImplementedError reads \"TODO(exNN, step N) in exercises/<file>.py: <what>\")"
                               if todo.raised else ""))
            continue
        if todo.exercise != stem[:4]:
            problems.append(f"{where}: names {todo.exercise}, but the file is {stem[:4]}'s")
        if missing := sorted(set(todo.steps) - steps):
            problems.append(f"{where}: names step {missing}, which grader/test_{exercise}.py does not have "
                            f"(its steps: {sorted(steps)})")
        text_after = todo.text[len(TODO_TAG.match(todo.text)[0]):]
        expected = f" in exercises/{Path(file).name}: " if todo.raised else ": "
        if not text_after.startswith(expected) or not text_after[len(expected):].strip():
            problems.append(f"{where}: after the tag, {text_after[:30]!r}; expected {expected!r} and what to build")
    # prose may say "TODO", but a TODO tag anywhere (a docstring's step table too) is in the one form
    for number, line in enumerate(source.splitlines(), 1):
        for match in re.finditer(r"TODO\(", line):
            if not TODO_TAG.match(line, match.start()):
                problems.append(f"{file}:{number}: {line[match.start():match.start() + 30]!r} is not in the form "
                                f"`TODO({stem[:4]}, step N)`")
    if not any(todo.exercise for todo in read_todos(source, file)):
        problems.append(f"{file}: no TODO in the form `TODO({stem[:4]}, step N): <what>`")
    return sorted(set(problems))


# ---- what a grader file declares, read from its syntax -------------------------------------------------------

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.Pow: operator.pow}


def _literal(node: ast.expr, names: dict[str, Any]) -> Any:
    """The value of a literal, a name bound to one, or simple arithmetic on them; KeyError/ValueError otherwise."""
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_literal(node.left, names), _literal(node.right, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand, names)
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_literal(element, names) for element in node.elts)
    return ast.literal_eval(node)


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """The module-level names bound to a literal value (or arithmetic on such names), `A, B = 1, 2` included."""
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        pairs = list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
            and len(target.elts) == len(value.elts) else [(target, value)]
        for name, expression in pairs:
            if isinstance(name, ast.Name):
                try:
                    names[name.id] = _literal(expression, names)
                except (KeyError, ValueError, TypeError, ZeroDivisionError, SyntaxError):
                    pass
    return names


@dataclass(frozen=True)
class Declared:
    """One check as its grader file writes it: its markers (name -> literal arguments; `repeated` names those given
    twice), the options of each, its docstring, its line and the names its body calls."""

    name: str
    marks: dict[str, tuple[Any, ...]]
    mark_options: dict[str, dict[str, Any]]
    repeated: tuple[str, ...]
    doc: str
    line: int
    calls: tuple[str, ...]


def read_declarations(source: str) -> tuple[tuple[str, ...], tuple[Declared, ...]]:
    """(a grader file's own `pytestmark` markers, `usefixtures` with its fixtures, and its checks) read from its
    source."""
    tree = ast.parse(source)
    names = module_constants(tree)
    file_marks: list[str] = []
    checks = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            file_marks += [_file_mark(value) for value in values]
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            marks: dict[str, tuple[Any, ...]] = {}
            options: dict[str, dict[str, Any]] = {}
            repeated = []
            for decorator in node.decorator_list:
                name = _mark_name(decorator)
                args: tuple[Any, ...] = ()
                if isinstance(decorator, ast.Call):
                    for arg in decorator.args:
                        args += _literal(arg.value, names) if isinstance(arg, ast.Starred) else (_literal(arg, names),)
                    options[name] = {k.arg: _literal(k.value, names) for k in decorator.keywords}
                if name in marks:
                    repeated.append(name)
                marks[name] = args
            calls = tuple(ast.unparse(call.func) for statement in node.body for call in ast.walk(statement)
                          if isinstance(call, ast.Call))
            checks.append(Declared(node.name.removeprefix("test_"), marks, options, tuple(repeated),
                                   ast.get_docstring(node) or "", node.lineno, calls))
    return tuple(file_marks), tuple(checks)


@cache
def declared(exercise: str) -> tuple[tuple[str, ...], tuple[Declared, ...]]:
    """(the file's own `pytestmark` markers, its checks) read from grader/test_<exercise>.py, nothing imported."""
    return read_declarations((GRADER_PACKAGE / f"test_{exercise}.py").read_text(encoding="utf-8"))


def _file_mark(node: ast.expr) -> str:
    """A file's marker by name; `usefixtures` with its fixtures ("usefixtures(s3_server)")."""
    name = _mark_name(node)
    if name == "usefixtures" and isinstance(node, ast.Call):
        return f"usefixtures({','.join(_literal(arg, {}) for arg in node.args)})"
    return name


def _mark_name(node: ast.expr) -> str:
    return ast.unparse(node.func if isinstance(node, ast.Call) else node).removeprefix("pytest.mark.")


def step_of(exercise: str, check: str) -> int:
    """The step number `check`'s `@pytest.mark.step` gives it (0 without one)."""
    marks = next((c.marks for c in declared(exercise)[1] if c.name == check), {})
    return int(marks["step"][0]) if marks.get("step") else 0


def not_gradable_here(exercise: str, check: str) -> str | None:
    """Why `check` cannot be graded on this machine (its `cuda_only` or `sandbox_only` marker), or None. A marker is
    the one way a check is skipped: the conftest reads it for pytest, and the grading child for the project's tests.
    `cuda_only`'s option `also="<function of the checks module>"` names a further condition (a reason, or None), e.g.
    a GPU without nvJPEG's hardware decoder."""
    check_declared = next((c for c in declared(exercise)[1] if c.name == check), None)
    if check_declared is not None and "sandbox_only" in check_declared.marks:
        from loaderlab.sandbox import unavailable

        reason = unavailable()
        return f"this check runs a torchrun job in the course's sandbox, and {reason}" if reason else None
    if check_declared is None or "cuda_only" not in check_declared.marks:
        return None
    from loaderlab.device import cuda_missing_reason

    reason = cuda_missing_reason()
    further = check_declared.mark_options.get("cuda_only", {}).get("also")
    if reason is None and further:
        reason = getattr(importlib.import_module(f"grader.checks.{exercise}"), further)()
    return reason


# ---- the constants a check uses ------------------------------------------------------------------------------

def _source_of(module: str) -> Path | None:
    path = REPO_ROOT / Path(*module.split("."))
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


@cache
def _module_facts(module: str) -> tuple[dict[str, Any], dict[str, ast.AST], dict[str, str]]:
    """(constants, top-level functions and classes, imported name -> its module) of a course module."""
    path = _source_of(module)
    if path is None:
        return {}, {}, {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    definitions = {node.name: node for node in tree.body
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    imported = {alias.asname or alias.name: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
                and node.module and node.module.split(".")[0] in ("loaderlab", "grader") for alias in node.names}
    return module_constants(tree), definitions, imported


def _numbers(value: Any) -> set[float]:
    if isinstance(value, bool):
        return set()
    if isinstance(value, int | float):
        return {float(value)}
    if isinstance(value, tuple):
        return set().union(*(_numbers(v) for v in value)) if value else set()
    return set()


def constants_used(module: str, *functions: str) -> dict[str, set[float]]:
    """'<module>.<NAME>' -> its numeric value(s), for every constant that `functions` of `module` (a module's top-level
    name) use, following the names they call or read through that module's functions and the course modules
    (loaderlab, grader) it imports."""
    found: dict[str, set[float]] = {}
    seen: set[tuple[str, str]] = set()
    pending = [(module, function) for function in functions]
    while pending:
        where, name = pending.pop()
        if (where, name) in seen:
            continue
        seen.add((where, name))
        constants, definitions, imported = _module_facts(where)
        if name in constants:
            found[f"{where}.{name}"] = _numbers(constants[name])
        elif name in imported:
            pending.append((imported[name], name))
        elif name in definitions:
            pending += [(where, node.id) for node in ast.walk(definitions[name]) if isinstance(node, ast.Name)]
    return found


def top_level_names(module: str) -> list[str]:
    """Every constant, function, class and course import of a course module."""
    constants, definitions, imported = _module_facts(module)
    return [*constants, *definitions, *imported]


def quoted_figures(text: str) -> list[str]:
    """Every number `text` quotes with a unit, as written ("1.5x", "30%", "2 ms")."""
    return [match[0] for match in QUOTED_FIGURE.finditer(" ".join(text.split()))]


def figure_held(figure: str, constants: set[float]) -> bool:
    """Whether a quoted figure ("30%", "2 ms", "1.85x") equals one of the constants: a percentage also as a fraction,
    milliseconds also as seconds, and a figure of two decimals or more as the constant rounded to them."""
    match = QUOTED_FIGURE.fullmatch(figure)
    value, unit = float(match[1]), match[2]
    candidates = {value} | ({value / 100} if unit == "%" else set()) | ({value / 1000} if unit == "ms" else set())
    decimals = len(match[1].partition(".")[2])
    for constant in constants:
        if any(abs(candidate - constant) <= 1e-9 * max(1.0, abs(constant)) for candidate in candidates):
            return True
        if decimals >= 2 and round(constant, decimals) in candidates:
            return True
    return False
