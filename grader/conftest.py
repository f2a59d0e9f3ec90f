"""pytest wiring for the grader: --target, the `grade` fixture, the summary table, results JSON."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from grader.results import NOT_STARTED, NOT_TIMED, PASS, CheckResult, summary_lines, write_json
from grader.runner import run_check
from loaderlab.machine import usable_cores
from loaderlab.paths import GRADER_DIR, REPO_ROOT

RESULTS = pytest.StashKey[list]()
DEFAULT_TIMEOUT_S = 120.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loaderlab grader")
    group.addoption("--target", default="exercises",
                    help="folder holding the exercise modules to grade (default: exercises; e.g. solutions)")
    group.addoption("--results", default=str(GRADER_DIR / "results.json"),
                    help="where to write the results as JSON (default: .grader/results.json)")
    group.addoption("--start-method", default=None, choices=multiprocessing.get_all_start_methods(),
                    help="how worker processes start in every check that does not choose (default: this platform's; "
                         "spawn is macOS's and Windows' default)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESULTS] = []


def target_dir(config: pytest.Config) -> Path:
    """--target resolved from the repo root (a path relative to the cwd works too)."""
    raw = Path(config.getoption("--target"))
    for candidate in (raw, REPO_ROOT / raw):
        if candidate.is_dir():
            return candidate.resolve()
    raise pytest.UsageError(f"--target {raw}: no such folder (relative paths resolve from {REPO_ROOT} or the cwd)")


@pytest.fixture
def grade(request: pytest.FixtureRequest):
    """Run this test's check (named after the test, minus `test_`) against the target, in a fresh process."""

    def run() -> CheckResult:
        exercise = request.module.EXERCISE
        check = request.node.originalname.removeprefix("test_")
        results: list[CheckResult] = request.config.stash[RESULTS]
        earlier = [r for r in results if r.exercise == exercise]
        if request.node.get_closest_marker("throughput") and not all(r.passed for r in earlier):
            started = any(r.status != NOT_STARTED for r in earlier)
            result = CheckResult(exercise, check, NOT_TIMED if started else NOT_STARTED,
                                 "not timed: the correctness checks above must pass first (fast and wrong is still wrong).")
        else:
            marker = request.node.get_closest_marker("timeout_s")
            timeout = float(marker.args[0]) if marker else DEFAULT_TIMEOUT_S
            result = run_check(target_dir(request.config), exercise, check, timeout,
                               request.config.getoption("--start-method"))
        results.append(result)
        if result.status != PASS:
            pytest.fail(result.explain(), pytrace=False)
        return result

    return run


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    results: list[CheckResult] = config.stash[RESULTS]
    if not results:
        return
    target = str(target_dir(config).relative_to(REPO_ROOT) if target_dir(config).is_relative_to(REPO_ROOT) else target_dir(config))
    terminalreporter.section("loaderlab grades")
    start_method = config.getoption("--start-method") or multiprocessing.get_start_method()
    for line in summary_lines(results, target + "/", usable_cores()):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"worker processes started with: {start_method}")
    path = Path(config.getoption("--results"))
    write_json(results, target, path, start_method)
    terminalreporter.write_line(f"\nresults saved to {path}")
