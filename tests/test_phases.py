"""`make test`'s runner (tests/phases.py): every phase runs and is timed even after one fails, and the run fails."""

from __future__ import annotations

from pathlib import Path

from phases import COURSE, PHASE_SETS, Phase, run  # tests/ is on sys.path (its conftest is at the root of tests/)


def test_every_phase_runs_and_is_timed_even_after_one_fails(tmp_path: Path) -> None:
    record = tmp_path / "phases.txt"
    record.write_text("")
    failing = Phase("fails", ("tests/no_such_file.py",), "")
    passing = Phase("passes", ("tests/test_pins.py", "--collect-only", "-q"), "")
    assert run((failing, passing), record, None) == ["fails"]
    lines = record.read_text().splitlines()
    assert [line.split(" s  ")[1] for line in lines] == ["fails (one at a time)", "passes (one at a time)"], lines


def test_what_measures_speed_runs_last_and_alone() -> None:
    """A timed test beside another measures both: every phase that selects `timing` or `throughput` tests runs one
    at a time, and the course's last phase is the timed one."""
    for phases in PHASE_SETS.values():
        for phase in phases:
            untimed = not phase.markers or "not timing" in phase.markers or "not throughput" in phase.markers
            assert untimed or phase.workers == 1, phase
    assert "(timing or throughput)" in COURSE[-1].markers and COURSE[-1].workers == 1
