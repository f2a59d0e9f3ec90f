"""`make test`'s runner (tests/phases.py): every phase runs and is timed even after one fails, and the run fails."""

from __future__ import annotations

from pathlib import Path

from loaderlab.paths import REPO_ROOT as REPO
from phases import COURSE, PHASE_SETS, Phase, run_phases  # tests/ is on sys.path (its conftest is at the root of tests/)


def test_every_phase_runs_and_is_timed_even_after_one_fails(tmp_path: Path) -> None:
    record = tmp_path / "phases.txt"
    record.write_text("")
    for name, body in (("test_fails.py", "assert False"), ("test_passes.py", "pass")):  # outside tests/: no conftest
        (tmp_path / name).write_text(f"def test_it():\n    {body}\n")
    failing = Phase("fails", (str(tmp_path / "test_fails.py"), "-q"), "")
    passing = Phase("passes", (str(tmp_path / "test_passes.py"), "-q"), "")
    assert run_phases((failing, passing), record, None, {}) == ["fails"]
    lines = record.read_text().splitlines()
    assert [line.split(" s  ")[1] for line in lines] == ["fails (one at a time)", "passes (one at a time)"], lines


def test_phases_beside_each_other_run_at_once_and_each_is_timed_and_judged(tmp_path: Path) -> None:
    record = tmp_path / "phases.txt"
    record.write_text("")
    (tmp_path / "test_slow.py").write_text("import time\ndef test_it():\n    time.sleep(1)\n    assert False\n")
    (tmp_path / "test_quick.py").write_text("def test_it():\n    pass\n")
    slow = Phase("slow", (str(tmp_path / "test_slow.py"), "-q"), "", beside_next=True)
    quick = Phase("quick", (str(tmp_path / "test_quick.py"), "-q"), "")
    assert run_phases((slow, quick), record, None, {}) == ["slow"]
    lines = record.read_text().splitlines()
    assert [line.split(" s  ")[1] for line in lines] == ["quick (one at a time)",
                                                          "slow (one at a time), beside the next phase"], lines
    assert (tmp_path / "phases-beside-0.log").read_text().count("1 failed") == 1


def untimed(phase: Phase) -> bool:
    return (not phase.markers or "not timing" in phase.markers or "not throughput" in phase.markers
            or phase.markers == "correctness_proof")   # tests/test_graders.py: none of them is timed


def test_what_measures_speed_runs_last_and_alone() -> None:
    """A timed test beside another measures both: every phase that selects `timing` or `throughput` tests runs one
    at a time, beside no other phase, and the course's last phase is the timed one."""
    for phases in PHASE_SETS.values():
        for phase, after in zip(phases, [*phases[1:], None]):
            assert untimed(phase) or phase.workers == 1, phase
            if phase.beside_next:
                assert untimed(phase) and (after is None or untimed(after)), (phase, after)
    assert "(timing or throughput)" in COURSE[-1].markers and COURSE[-1].workers == 1


def test_a_proofs_fingerprint_covers_what_its_timed_check_runs() -> None:
    """A proof (tests/proofs.py) is stale when any course module its check imports changes: the fingerprint reads
    them all, transitively, and the planted folder's own code; a correctness proof also what runs the check."""
    from proofs import CORRECTNESS, TIMED, course_sources

    planted = REPO / "tests" / "planted" / "ex03_single_worker"
    sources = {p.relative_to(REPO).as_posix() for p in
               course_sources([REPO / "grader" / "checks" / "ex03_process_loader.py", *planted.glob("*.py")])}
    assert {"grader/support.py", "loaderlab/bench.py", "loaderlab/images.py", "loaderlab/baselines.py",
            "solutions/ex03_process_loader.py"} <= sources, sorted(sources)
    other = REPO / "tests" / "planted" / "ex03_pool_of_float32"
    for kind in (TIMED, CORRECTNESS):
        assert kind.fingerprint(planted, "ex03_process_loader") != kind.fingerprint(other, "ex03_process_loader")
    assert TIMED.fingerprint(planted, "ex03_process_loader") != CORRECTNESS.fingerprint(planted, "ex03_process_loader")


def test_each_phase_sets_variables_by_name() -> None:
    """A phase's settings are environment variables, a name and a value each (a name shadowed by another object once
    reached the environment as a method)."""
    for phases in PHASE_SETS.values():
        for phase in phases:
            assert all(isinstance(name, str) and isinstance(value, str) for name, value in phase.env().items()), phase
