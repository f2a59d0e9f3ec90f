"""pytest wiring for the grader: --target, the `grade` fixture, steps, the summary table, results JSON."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.catalog import not_gradable_here
from grader.results import (NOT_STARTED, NOT_TIMED, PASS, SKIPPED, CheckResult, declared_checks, is_learners,
                            results_file, summary_lines, write_json)
from grader.runner import run_check
from loaderlab.machine import usable_cores
from loaderlab.paths import REPO_ROOT

RESULTS = pytest.StashKey[list]()
RECORDED = pytest.StashKey[set]()   # the node ids whose check has a result (a skip before `grade` runs has none)
DEFAULT_TIMEOUT_S = 120.0
NO_SERVER_NOTE = ("No S3 server is running: this grade starts one of its own for module 10's checks and stops it at "
                  "the end (the dataset stays uploaded in data/storage/ for the next start). `make storage` keeps one "
                  "running between grades and notebooks, so that a grade need not start one; `make storage-stop` "
                  "stops it.")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loaderlab grader")
    group.addoption("--target", default="exercises",
                    help="folder holding the exercise modules to grade (default: exercises; e.g. solutions)")
    group.addoption("--results", default=None,
                    help="where to merge the results as JSON (default: .grader/results.json for your exercises/, "
                         f".grader/targets/<folder>.json for another folder; {os.devnull}: not saved)")
    group.addoption("--start-method", default=None, choices=multiprocessing.get_all_start_methods(),
                    help="how worker processes start in every check that does not choose (default: this platform's; "
                         "spawn is macOS's and Windows' default)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESULTS] = []
    config.stash[RECORDED] = set()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A check marked `cuda_only` or `sandbox_only` is skipped, with the reason, where it cannot be graded
    (`catalog.not_gradable_here`: no CUDA GPU, or the further condition the marker names; no sandbox)."""
    if any(item.get_closest_marker(name) for name in ("cuda_only", "sandbox_only")) and hasattr(item.module, "EXERCISE"):
        reason = not_gradable_here(item.module.EXERCISE, item.originalname.removeprefix("test_"))
        if reason:
            pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A grader test skipped before its check ran (the `cuda_only` and `sandbox_only` marks above, a skip in the test's body) is recorded
    as a skipped check with pytest's reason, so that the table and the saved grades say what was not graded."""
    report = yield
    if report.skipped and "grade" in getattr(item, "fixturenames", ()) \
            and item.nodeid not in item.config.stash[RECORDED] and hasattr(item.module, "EXERCISE"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _record(item, CheckResult(item.module.EXERCISE, item.originalname.removeprefix("test_"), SKIPPED,
                                  reason.removeprefix("Skipped: ")))
    return report


def _record(item: pytest.Item, result: CheckResult) -> None:
    """Add a check's result to this session's, with its step and whether it is timed (read from its marks)."""
    marker = item.get_closest_marker("step")
    result.step, result.step_title = (int(marker.args[0]), str(marker.args[1])) if marker else (0, "")
    result.timed = item.get_closest_marker("throughput") is not None
    item.config.stash[RESULTS].append(result)
    item.config.stash[RECORDED].add(item.nodeid)


@pytest.fixture(scope="session")
def s3_server(request: pytest.FixtureRequest) -> Iterator[None]:
    """Module 10's S3 server for this session, announced to every grading process it starts (LOADERLAB_S3_* in this
    process's environment, which grader.runner hands on): each check's `shared_server()` then reuses it. The server
    the run was given (announced, or `make storage`'s), else one of this session's own, on the first persistent data
    folder no other server uses (the dataset uploaded there by an earlier start is used again), stopped at the end;
    the session then says once how to keep one running."""
    from loaderlab.storage.server import Endpoint, read_state, running_server, shared_server, state_server_answers

    given = Endpoint.from_env() is not None or state_server_answers(read_state())
    if not given:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():  # shown as it starts: it says why the first check waits
                reporter.write_line(f"\n{NO_SERVER_NOTE}")
    with shared_server() if given else running_server() as endpoint:
        before = {name: os.environ.get(name) for name in endpoint.env()}
        os.environ.update(endpoint.env())
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def target_dir(config: pytest.Config) -> Path:
    """--target resolved from the repo root (a path relative to the cwd works too)."""
    raw = Path(config.getoption("--target"))
    for candidate in (raw, REPO_ROOT / raw):
        if candidate.is_dir():
            return candidate.resolve()
    raise pytest.UsageError(f"--target {raw}: no such folder (relative paths resolve from {REPO_ROOT} or the cwd)")


@pytest.fixture
def grade(request: pytest.FixtureRequest):
    """Run this test's check (named after the test, minus `test_`) against the target, in a fresh process.

    A timed check runs only once every correctness check of its exercise has passed (or was skipped here).
    """

    def run() -> CheckResult:
        exercise = request.module.EXERCISE
        check = request.node.originalname.removeprefix("test_")
        timed = request.node.get_closest_marker("throughput") is not None
        results: list[CheckResult] = request.config.stash[RESULTS]
        earlier = [r for r in results if r.exercise == exercise and not r.timed and r.status != SKIPPED]
        if timed and not all(r.passed for r in earlier):
            started = any(r.status != NOT_STARTED for r in earlier)
            result = CheckResult(exercise, check, NOT_TIMED if started else NOT_STARTED,
                                 "not timed: the correctness checks above must pass first (fast and wrong is still wrong).")
        else:
            marker = request.node.get_closest_marker("timeout_s")
            timeout = float(marker.args[0]) if marker else DEFAULT_TIMEOUT_S
            result = run_check(target_dir(request.config), exercise, check, timeout,
                               request.config.getoption("--start-method"))
        _record(request.node, result)
        if result.status == SKIPPED:
            pytest.skip(result.message)
        if result.status != PASS:
            pytest.fail(result.explain(), pytrace=False)
        return result

    return run


def _not_run(results: list[CheckResult]) -> dict[str, dict[str, bool]]:
    """Per exercise graded in this session, its checks that did not run (deselected), with whether each is timed."""
    ran: dict[str, set[str]] = {}
    for result in results:
        ran.setdefault(result.exercise, set()).add(result.check)
    return {exercise: {c.name: c.timed for c in declared_checks(exercise).values() if c.name not in checks}
            for exercise, checks in ran.items()}


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    results: list[CheckResult] = config.stash[RESULTS]
    if not results:
        return
    folder = target_dir(config)
    target = str(folder.relative_to(REPO_ROOT) if folder.is_relative_to(REPO_ROOT) else folder)
    terminalreporter.section("loaderlab grades")
    start_method = config.getoption("--start-method") or multiprocessing.get_start_method()
    for line in summary_lines(results, target + "/", usable_cores(), _not_run(results)):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"worker processes started with: {start_method}")
    requested = config.getoption("--results")
    path = results_file(folder, Path(requested) if requested else None)
    if path == Path(os.devnull):
        terminalreporter.write_line(f"\nresults not saved (--results {os.devnull})")
        return
    write_json(results, target, path, start_method)
    whose = "" if is_learners(folder) else (
        f" (the grades of {target}/, kept apart: only your exercises/ are graded into .grader/results.json)")
    terminalreporter.write_line(f"\nresults saved to {path}{whose}")
