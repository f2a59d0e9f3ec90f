"""The graders themselves are tested: stubs read 'not started', planted defects fail for the planted
reason, every check is proven able to fail, and correct alternatives to `solutions/` pass.
(That the solutions pass is `make test`'s run of `pytest grader/ --target solutions`.)"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import catalog
from grader.results import BUSY_SHARE, FAIL, NOT_STARTED, PASS, SKIPPED
from grader.runner import run_check, run_checks_together
from loaderlab.machine import usable_cores
from loaderlab.paths import REPO_ROOT
from loaderlab.sandbox import unavailable as sandbox_unavailable
from proofs import CORRECTNESS, TIMED, proof_key  # tests/ is on sys.path (its conftest is at the root of tests/)

PLANTED = REPO_ROOT / "tests" / "planted"
STUBS = REPO_ROOT / "tests" / "stubs"  # complete, runnable stubs: each check fails them for its own reason
ALTERNATIVES = REPO_ROOT / "tests" / "alternatives"
BUSY_RETRIES = 2  # a core-scaled target measured on a busy machine is retried this often
EXERCISES = [exercise.name for exercise in catalog.exercises()]


@dataclass(frozen=True)
class Planted:
    """One planted wrong implementation, as its folder's expect.toml describes it."""

    folder: str
    exercise: str
    caught_by: str | None          # the correctness check that must fail it ...
    words: str | None              # ... with these words in its message
    too_slow_for: str | None       # the throughput check it must miss when timed directly
    scaled_by_cores: bool          # that target is skipped on one core by design, and retried where the machine gave too
                                   # little (few free cores, or its ceiling too low to time: exercise 03)
    quiet: bool                    # its failing timed check prints its comparison table and nothing else
    needs: str | None              # "cuda": only a CUDA device can show the defect; "two cores": only 2+ cores;
                                   # "sandbox": only a torchrun job in the course's sandbox (Linux)


def _planted() -> dict[str, Planted]:
    found = {}
    for expect in sorted(PLANTED.glob("*/expect.toml")):
        spec = tomllib.loads(expect.read_text())
        caught, slow = spec.get("caught_by", {}), spec.get("too_slow", {})
        found[expect.parent.name] = Planted(expect.parent.name, spec["exercise"], caught.get("check"),
                                            caught.get("words"), slow.get("check"), slow.get("scaled_by_cores", False),
                                            slow.get("prints_only_its_comparison", False), spec.get("needs"))
    return found


PLANTED_IMPLEMENTATIONS = _planted()
CAUGHT = sorted(name for name, p in PLANTED_IMPLEMENTATIONS.items() if p.caught_by)
TOO_SLOW = sorted(name for name, p in PLANTED_IMPLEMENTATIONS.items() if p.too_slow_for)


def skip_unless_it_can_show(planted: Planted) -> None:
    """Skip, saying why, where this machine lacks what the planted defect needs to show."""
    if planted.needs == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.skip(f"{planted.folder} shows its defect only on a CUDA device, and this machine has none")
    elif planted.needs == "sandbox":
        if sandbox_unavailable():
            pytest.skip(f"{planted.folder} shows its defect only in a torchrun job, and {sandbox_unavailable()}")
    elif planted.needs == "two cores":
        if usable_cores() < 2:
            pytest.skip(f"{planted.folder} shows its defect only with two usable cores or more, and this machine has one")
    elif planted.needs is not None:
        raise AssertionError(f"{planted.folder}: unknown `needs = {planted.needs!r}` in expect.toml")


def checks_of(exercise: str, timed: bool | None = None) -> list[str]:
    """The checks of an exercise in file order: all, or only the timed (True) or untimed (False) ones."""
    return [check.name for check in catalog.find(exercise).checks if timed is None or check.timed == timed]


@dataclass(frozen=True)
class Alternative:
    """A correct implementation that takes another route than solutions/, as its folder's expect.toml describes it."""

    folder: str
    exercise: str
    route: str                     # what it does differently
    timed: tuple[str, ...]         # timed checks it must pass too (its route could change the speed)


def _alternatives() -> dict[str, Alternative]:
    found = {}
    for expect in sorted(ALTERNATIVES.glob("*/expect.toml")):
        spec = tomllib.loads(expect.read_text())
        found[expect.parent.name] = Alternative(expect.parent.name, spec["exercise"], spec["route"],
                                                tuple(spec.get("timed", ())))
    return found


ALTERNATIVE_IMPLEMENTATIONS = _alternatives()


def stub_failures(exercise: str) -> dict[str, str] | None:
    """For a stub that is a complete program (tests/stubs/README.md): each untimed check and the words its failure
    on the untouched stub must hold; None for a stub that raises NotImplementedError at its TODOs."""
    table = STUBS / f"{exercise}.toml"
    return tomllib.loads(table.read_text())["fails"] if table.is_file() else None


GRADED_STUBS = [exercise for exercise in EXERCISES if stub_failures(exercise) is None]  # the others: above


@pytest.mark.correctness_proof
@pytest.mark.parametrize("exercise", GRADED_STUBS)
def test_an_untouched_stub_reads_not_started_in_a_hand_out(exercise: str, hand_out: tuple[Path, dict[str, str]]) -> None:
    """Grading a hand-out's untouched stub, as a learner would before starting: every correctness check reads "not
    started" and points at a TODO. A proof like the planted folders' (tests/proofs.py): recorded for the stub, its
    checks and grader and what they import, and re-run only when they change. (A stub that is a complete program with
    planted defects, tests/stubs/, is graded by `test_untouched_complete_stub_fails_each_check_for_its_reason`.)"""
    stub = REPO_ROOT / "exercises" / f"{exercise}.py"
    skip_if_proved_on_this_code(stub, exercise)
    dest, env = hand_out
    results = dest / ".grader" / f"stub-grades-{exercise}.json"
    done = subprocess.run([sys.executable, "-m", "pytest", f"grader/test_{exercise}.py", "-m", "not throughput", "-q",
                           "-p", "no:cacheprovider", "--results", str(results)],
                          cwd=dest, env=env, capture_output=True, text=True, timeout=600)
    assert results.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    graded = json.loads(results.read_text())["exercises"]
    assert list(graded) == [exercise], f"graded {sorted(graded)}"
    cuda_only = {check.name for check in catalog.find(exercise).checks if check.cuda_only}
    for result in graded[exercise]["checks"]:
        if result["status"] == SKIPPED and result["check"] in cuda_only:
            continue  # no CUDA GPU here: skipped, with the reason, before the stub is touched
        assert result["status"] == NOT_STARTED and "TODO" in result["message"], (
            f"{exercise}.{result['check']} on the hand-out's stub: {result['status']}: {result['message'][:800]}")
    settle_correctness_proof(stub, exercise)


def test_every_planted_folder_says_what_must_catch_it() -> None:
    folders = {p.name for p in PLANTED.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders == set(PLANTED_IMPLEMENTATIONS), "each planted folder needs an expect.toml (see tests/planted/README.md)"
    for planted in PLANTED_IMPLEMENTATIONS.values():
        assert planted.caught_by or planted.too_slow_for, f"{planted.folder}: expect.toml names no check"
        assert (planted.caught_by is None) == (planted.words is None), f"{planted.folder}: give check and words together"
        checks = checks_of(planted.exercise)
        for check in filter(None, (planted.caught_by, planted.too_slow_for)):
            assert check in checks, f"{planted.folder}: {planted.exercise} has no check {check!r}"
        assert (PLANTED / planted.folder / f"{planted.exercise}.py").is_file(), f"{planted.folder}: no {planted.exercise}.py"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_check_is_proven_able_to_fail(exercise: str) -> None:
    """A check that cannot fail is a defect: each one must catch at least one planted implementation."""
    named = {check for p in PLANTED_IMPLEMENTATIONS.values() if p.exercise == exercise
             for check in (p.caught_by, p.too_slow_for) if check}
    named |= set(stub_failures(exercise) or {})  # a complete stub's planted defects, each failing its check
    never = [check for check in checks_of(exercise) if check not in named]
    assert not never, f"{exercise}: no planted implementation in tests/planted/ is caught by {never}"


@pytest.mark.parametrize("exercise", sorted(path.stem for path in STUBS.glob("ex*.toml")))
def test_untouched_complete_stub_fails_each_check_for_its_reason(exercise: str) -> None:
    """A stub that is a complete program with planted defects: every untimed check fails it, with its words, except
    those it already does right ([passes], each proven able to fail by a planted folder). (The
    other stubs read "not started" in a hand-out: tests/test_course_structure.py.)"""
    expected = stub_failures(exercise)
    right = tomllib.loads((STUBS / f"{exercise}.toml").read_text()).get("passes", {}).get("checks", [])
    checks = checks_of(exercise, timed=False)
    assert sorted([*expected, *right]) == sorted(checks), (
        f"tests/stubs/{exercise}.toml must list each untimed check once, under [fails] or [passes]: {checks}")
    results = run_checks_together(REPO_ROOT / "exercises", exercise, checks, timeout_s=60 + 10 * len(checks))
    for check, result in results.items():
        if check in right:
            assert result.status == PASS, f"{check}: the shipped script does this right, yet {result.explain()}"
            continue
        assert result.status == FAIL, f"{check} on the stub: expected a coaching failure, got {result.explain()}"
        assert expected[check] in result.message, f"{check} failed the stub, but not for its planted reason: {result.message}"


def skip_if_proved_on_this_code(folder, exercise: str) -> None:
    """`make test` does not re-run a correctness proof recorded on the code as it is (tests/proofs.py)."""
    if not CORRECTNESS.recording and CORRECTNESS.is_current(folder, exercise):
        pytest.skip(f"proved on this code ({CORRECTNESS.path.name})")


def settle_correctness_proof(folder, exercise: str) -> None:
    """A proof that passed: recorded under `make test-proofs`; otherwise it passed on code the record does not
    hold, and fails until it is recorded."""
    CORRECTNESS.record(folder, exercise)
    assert CORRECTNESS.recording or CORRECTNESS.is_current(folder, exercise), (
        f"the proof passed, but is not recorded: {CORRECTNESS.stale(folder)}")


@pytest.mark.correctness_proof
@pytest.mark.parametrize("folder", CAUGHT)
def test_planted_defect_is_caught(folder: str) -> None:
    planted = PLANTED_IMPLEMENTATIONS[folder]
    skip_unless_it_can_show(planted)
    skip_if_proved_on_this_code(PLANTED / folder, planted.exercise)
    check = planted.caught_by
    result = run_check(PLANTED / folder, planted.exercise, check, timeout_s=90)
    assert result.status != PASS, f"the grader let the planted defect {folder!r} pass {check}"
    assert result.status == FAIL, f"{folder}: expected a coaching failure, got {result.explain()}"
    assert planted.words in result.message, f"{folder} failed {check}, but not for the planted reason: {result.message}"
    settle_correctness_proof(PLANTED / folder, planted.exercise)


@pytest.mark.timing
@pytest.mark.target_proof
@pytest.mark.parametrize("folder", TOO_SLOW)
def test_planted_slow_implementation_misses_the_target(folder: str) -> None:
    planted = PLANTED_IMPLEMENTATIONS[folder]
    skip_unless_it_can_show(planted)
    check = planted.too_slow_for
    if planted.scaled_by_cores and usable_cores() < 2:
        pytest.skip(f"{check} is scaled by cores and skipped on one core")
    busy = []
    for _ in range(BUSY_RETRIES + 1 if planted.scaled_by_cores else 1):
        result = run_check(PLANTED / folder, planted.exercise, check, timeout_s=300)
        free = (result.metrics or {}).get("free_cores")
        if planted.scaled_by_cores and free is not None and free < BUSY_SHARE * usable_cores():
            busy.append(f"{free:.1f} cores free")  # a busy machine lowers the target by design: this run proves nothing
            continue
        if planted.scaled_by_cores and result.status == PASS and not result.metrics:
            busy.append("timing skipped")  # the check found too little to time against (exercise 03's ceiling)
            continue
        assert result.status == FAIL and result.message.startswith("too slow"), result.explain()
        assert result.metrics and result.metrics["ratio"] < result.metrics["target"]
        if planted.quiet:  # nothing that is not the learner's (a library's log lines), the table among the notes
            assert not result.output.strip(), f"printed beside the comparison table:\n{result.output}"
            lines = [line for line in result.notes.splitlines() if line.strip()]
            assert len(lines) == 2 and lines[0].startswith("candidate"), f"beyond the comparison table:\n{result.notes}"
        TIMED.record(PLANTED / folder, planted.exercise)
        return
    pytest.skip(f"{check} scales with what the machine gives, and it was busy in every run ({', '.join(busy)}; "
                f"{usable_cores()} usable cores): the naive version cannot be told apart")


def test_start_method_option_reaches_the_learners_loader(tmp_path) -> None:
    """`pytest grader/ --start-method spawn` must really grade under spawn: a loader that checks says so."""
    (tmp_path / "ex03_process_loader.py").write_text(
        "import multiprocessing\n"
        "from solutions.ex03_process_loader import *\n"
        "from solutions.ex03_process_loader import ProcessLoader as Reference\n\n\n"
        "class ProcessLoader(Reference):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        assert multiprocessing.get_start_method() == 'spawn', 'graded under ' + multiprocessing.get_start_method()\n"
        "        super().__init__(*args, **kwargs)\n")
    check = "batches_match_sequential_reference"
    assert run_check(tmp_path, "ex03_process_loader", check, 90, start_method="spawn").status == PASS
    other = next(m for m in ("fork", "forkserver") if m in multiprocessing.get_all_start_methods())
    result = run_check(tmp_path, "ex03_process_loader", check, 90, start_method=other)
    assert result.status == FAIL and f"graded under {other}" in result.message, result.explain()


@pytest.mark.correctness_proof
@pytest.mark.parametrize("folder", sorted(ALTERNATIVE_IMPLEMENTATIONS))
def test_correct_alternative_passes(folder: str) -> None:
    """Another route to a right answer must pass every correctness check."""
    alternative = ALTERNATIVE_IMPLEMENTATIONS[folder]
    skip_if_proved_on_this_code(ALTERNATIVES / folder, alternative.exercise)
    checks = checks_of(alternative.exercise, timed=False)
    # Together in one process (a Python start and a torch or TensorFlow import per check saved): a correct
    # alternative leaves nothing behind that another check could trip on; a rejection is rerun alone to confirm.
    results = run_checks_together(ALTERNATIVES / folder, alternative.exercise, checks, timeout_s=120 * len(checks))
    for check, result in results.items():
        if result.status not in (PASS, SKIPPED):  # skipped: not gradable on this machine (a CUDA-only check)
            result = run_check(ALTERNATIVES / folder, alternative.exercise, check, timeout_s=300)
        assert result.status in (PASS, SKIPPED), f"{folder} ({alternative.route}) was rejected by {check}: {result.explain()}"
    settle_correctness_proof(ALTERNATIVES / folder, alternative.exercise)


@pytest.mark.timing
@pytest.mark.target_proof
@pytest.mark.parametrize("folder", sorted(name for name, a in ALTERNATIVE_IMPLEMENTATIONS.items() if a.timed))
def test_correct_alternative_meets_the_targets_its_route_could_move(folder: str) -> None:
    """A route that could change the speed must pass the timed checks too (after the correctness checks)."""
    alternative = ALTERNATIVE_IMPLEMENTATIONS[folder]
    for check in alternative.timed:
        result = run_check(ALTERNATIVES / folder, alternative.exercise, check, timeout_s=300)
        assert result.status == PASS, f"{folder} ({alternative.route}) was rejected by {check}: {result.explain()}"
    TIMED.record(ALTERNATIVES / folder, alternative.exercise)


def _proofs() -> dict[str, tuple[object, str]]:
    """Every proof of a timed target `make test-targets` records: its key, folder and exercise. Planted folders that
    only a CUDA device shows are proved on one (docs/gpu-measurements-owed.md), not here."""
    folders = [(PLANTED / p.folder, p.exercise) for p in PLANTED_IMPLEMENTATIONS.values()
               if p.too_slow_for and p.needs != "cuda"]
    folders += [(ALTERNATIVES / a.folder, a.exercise) for a in ALTERNATIVE_IMPLEMENTATIONS.values() if a.timed]
    return {proof_key(folder): (folder, exercise) for folder, exercise in folders}


PROOFS = _proofs()


@pytest.mark.parametrize("key", sorted(PROOFS))
def test_the_timed_target_was_proved_on_this_code(key: str) -> None:
    """`make test` does not time the planted slow implementations and the alternatives (`make test-targets` does):
    it holds the record of their last passing run to the code as it is now."""
    folder, exercise = PROOFS[key]
    recorded = TIMED.read().get(key)
    assert recorded is not None, (
        f"{key}: no proof recorded in {TIMED.path.name}. Run `{TIMED.command}` (one at a time, about 5 minutes on 2 "
        "cores) and commit the record it writes.")
    assert recorded == TIMED.fingerprint(folder, exercise), TIMED.stale(folder) + " (one at a time, nothing else running)"


def test_the_records_of_proofs_name_only_folders_that_exist() -> None:
    gone = sorted(set(TIMED.read()) - set(PROOFS))
    assert not gone, f"{TIMED.path.name} records proofs of folders that are gone or untimed: {gone}"
    correctness = ({proof_key(PLANTED / f) for f in CAUGHT} | {proof_key(ALTERNATIVES / f) for f in ALTERNATIVE_IMPLEMENTATIONS}
                   | {proof_key(REPO_ROOT / "exercises" / f"{exercise}.py") for exercise in GRADED_STUBS})
    gone = sorted(set(CORRECTNESS.read()) - correctness)
    assert not gone, f"{CORRECTNESS.path.name} records proofs of folders that are gone or not graded for correctness: {gone}"


def test_every_alternative_folder_says_what_route_it_takes() -> None:
    folders = {p.name for p in ALTERNATIVES.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders == set(ALTERNATIVE_IMPLEMENTATIONS), "each alternative folder needs an expect.toml (see tests/alternatives/README.md)"
    for alternative in ALTERNATIVE_IMPLEMENTATIONS.values():
        assert (ALTERNATIVES / alternative.folder / f"{alternative.exercise}.py").is_file()
        for check in alternative.timed:
            assert check in checks_of(alternative.exercise, timed=True), f"{alternative.folder}: no timed check {check!r}"


PROCESS_WORDS = ("num_workers", "multiprocessing", "ProcessPool", "mp_context")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_graders_of_exercises_that_start_processes_are_marked_for_spawn(exercise: str) -> None:
    """`make test` re-grades under spawn only the exercises marked `starts_processes`: the mark must follow the code."""
    solution = (REPO_ROOT / "solutions" / f"{exercise}.py").read_text()
    starts = any(word in solution for word in PROCESS_WORDS)
    marked = catalog.find(exercise).starts_processes
    assert starts == marked, (f"{exercise}: its solution {'starts' if starts else 'starts no'} worker processes; "
                              f"{'add' if starts else 'remove'} `starts_processes` in grader/test_{exercise}.py (its "
                              "pytestmark, or each check that starts them)")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_checks_left_out_of_the_spawn_pass_start_spawn_workers_themselves(exercise: str) -> None:
    """`make test` skips `spawn_case_of_its_own` checks under spawn: each must really start spawn workers itself."""
    import inspect

    checks = importlib.import_module(f"grader.checks.{exercise}")
    for check in catalog.find(exercise).checks:
        if "spawn_case_of_its_own" in check.marks:
            source = inspect.getsource(getattr(checks, check.name))
            assert '"spawn"' in source, f"{exercise}: {check.name} is marked spawn_case_of_its_own but starts no spawn workers itself"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_checks_covered_under_spawn_name_a_check_the_spawn_pass_runs(exercise: str) -> None:
    """`make test` skips `spawn_covered_by(check)` checks under spawn: the check named must be of the same exercise,
    start workers, and be graded under spawn itself (by the spawn pass, or as a spawn case of its own)."""
    checks = {check.name: check for check in catalog.find(exercise).checks}
    whole_file = "starts_processes" in catalog.declared(exercise)[0]
    for name, check in checks.items():
        if "spawn_covered_by" not in check.marks:
            continue
        covering = check.marks["spawn_covered_by"][0]
        other = checks.get(covering)
        assert other is not None, f"{exercise}: {name} is spawn_covered_by({covering!r}), which is not a check of it"
        runs_under_spawn = whole_file or "starts_processes" in other.marks
        assert runs_under_spawn and "spawn_covered_by" not in other.marks and not other.timed, (
            f"{exercise}: {name} is covered by {covering}, which the spawn pass does not run either")
