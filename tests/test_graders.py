"""The graders themselves are tested: stubs read 'not started', planted defects fail for
the planted reason. (That the solutions pass is `make test`'s run of `pytest grader/ --target solutions`.)"""

from __future__ import annotations

import importlib

import pytest

from grader.results import FAIL, NOT_STARTED, PASS
from grader.runner import run_check
from loaderlab.machine import usable_cores
from loaderlab.paths import REPO_ROOT

PLANTED = REPO_ROOT / "tests" / "planted"
EXERCISES = sorted(p.stem.removeprefix("test_") for p in (REPO_ROOT / "grader").glob("test_ex*.py"))

# planted folder -> (exercise, the check that must catch it, words its message must contain)
PLANTED_DEFECTS = {
    "ex01_bottleneck_first": ("ex01_profile_and_fix", "bottleneck_is_named", "the slowest stage is"),
    "ex01_profile_even_split": ("ex01_profile_and_fix", "profile_times_each_stage", "Time each stage call on its own"),
    "ex01_skips_silently": ("ex01_profile_and_fix", "dirty_files_are_skipped_and_reported", "silent loss"),
    "ex01_drops_last_batch": ("ex01_profile_and_fix", "batches_match_reference", "last partial batch kept"),
    "ex01_float32_batches": ("ex01_profile_and_fix", "batches_match_reference", "keep uint8"),
    "ex01_swallows_missing_file": ("ex01_profile_and_fix", "missing_file_raises", "let FileNotFoundError through"),
    "ex02_prefetch_loads_everything": ("ex02_threaded_prefetch", "prefetcher_is_bounded", "ahead of the consumer"),
    "ex02_prefetch_swallows_errors": ("ex02_threaded_prefetch", "prefetcher_surfaces_producer_errors", "never swallowed"),
    "ex02_prefetch_leaks_thread": ("ex02_threaded_prefetch", "prefetcher_stops_when_closed_or_dropped", "still running"),
    "ex02_prefetch_not_in_background": ("ex02_threaded_prefetch", "prefetcher_reads_ahead_in_background", "start reading ahead"),
    "ex02_map_out_of_order": ("ex02_threaded_prefetch", "threaded_map_keeps_order", "input order"),
    "ex02_map_sequential": ("ex02_threaded_prefetch", "threaded_map_uses_its_threads", "at the same time"),
    "ex03_out_of_order": ("ex03_process_loader", "batches_match_sequential_reference", "out of order"),
    "ex03_same_augmentation_every_worker": ("ex03_process_loader", "augmentations_differ_between_samples", "same random draw"),
    "ex03_leaks_shared_memory": ("ex03_process_loader", "close_leaves_nothing_behind", "not unlinked"),
    "ex03_swallows_worker_error": ("ex03_process_loader", "worker_error_reaches_the_parent", "never swallowed"),
    "ex03_hangs_on_dead_worker": ("ex03_process_loader", "dead_worker_is_reported", "the loader hung"),
    "ex03_single_worker": ("ex03_process_loader", "work_runs_in_worker_processes", "in 1 process"),
}
# planted folder -> throughput check it must fail when timed directly (correctness gating bypassed)
PLANTED_TOO_SLOW = {
    "ex01_uint8_only": ("ex01_profile_and_fix", "faster_than_naive"),
    "ex02_map_sequential": ("ex02_threaded_prefetch", "io_reads_with_threads"),
    "ex02_prefetch_not_in_background": ("ex02_threaded_prefetch", "prefetch_overlaps_compute"),
    "ex03_single_worker": ("ex03_process_loader", "processes_beat_the_gil"),
}


# Targets scaled by usable cores; on one core they are skipped by design, so a slow planted one passes.
CORE_SCALED_CHECKS = {"processes_beat_the_gil"}


def checks_of(exercise: str) -> list[str]:
    module = importlib.import_module(f"grader.test_{exercise}")
    return [name.removeprefix("test_") for name in vars(module) if name.startswith("test_")]


def test_every_planted_folder_is_registered() -> None:
    folders = {p.name for p in PLANTED.iterdir() if p.is_dir() and not p.name.startswith("_")}
    registered = set(PLANTED_DEFECTS) | set(PLANTED_TOO_SLOW)
    assert folders == registered, "register each planted folder (and only those) in PLANTED_DEFECTS or PLANTED_TOO_SLOW"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_untouched_stub_reads_not_started(exercise: str) -> None:
    for check in checks_of(exercise):
        result = run_check(REPO_ROOT / "exercises", exercise, check, timeout_s=60)
        assert result.status == NOT_STARTED, f"{check} on the stub: {result.explain()}"
        assert "TODO" in result.message, f"{check}: the message should point at the TODO: {result.message}"


@pytest.mark.parametrize("folder", sorted(PLANTED_DEFECTS))
def test_planted_defect_is_caught(folder: str) -> None:
    exercise, check, words = PLANTED_DEFECTS[folder]
    result = run_check(PLANTED / folder, exercise, check, timeout_s=90)
    assert result.status != PASS, f"the grader let the planted defect {folder!r} pass {check}"
    assert result.status == FAIL, f"{folder}: expected a coaching failure, got {result.explain()}"
    assert words in result.message, f"{folder} failed {check}, but not for the planted reason: {result.message}"


@pytest.mark.parametrize("folder", sorted(PLANTED_TOO_SLOW))
def test_planted_slow_implementation_misses_the_target(folder: str) -> None:
    exercise, check = PLANTED_TOO_SLOW[folder]
    if check in CORE_SCALED_CHECKS and usable_cores() < 2:
        pytest.skip(f"{check} is scaled by cores and skipped on one core")
    result = run_check(PLANTED / folder, exercise, check, timeout_s=300)
    assert result.status == FAIL and result.message.startswith("too slow"), result.explain()
    assert result.metrics and result.metrics["ratio"] < result.metrics["target"]
