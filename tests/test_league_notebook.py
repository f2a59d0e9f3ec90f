"""Notebook 08's league section (`league.notebook`): the league run in this process on `ci`, and the line per
exercise of yours that says where it stands against the solution and which module to revisit."""

from __future__ import annotations

from typing import Any

import pytest

from league import entries
from league import table as league
from league import notebook as league_notebook


def _row(name: str, status: str, images_per_s: list[float] | None = None, note: str = "") -> dict[str, Any]:
    speeds = images_per_s or []
    return {"name": name, "title": name, "status": status, "note": note, "images_per_s": speeds,
            "median": sorted(speeds)[len(speeds) // 2] if speeds else None}


def _lessons(*rows: dict[str, Any]) -> dict[str, str]:
    lines = league_notebook.lessons({"rows": list(rows)})
    return {line.split(":")[0]: line for line in lines}


def test_a_trailing_entry_is_sent_back_to_its_module_and_a_level_one_is_not() -> None:
    lines = _lessons(_row("ex04", "ranked", [200.0]), _row("yours-ex04", "ranked", [100.0]),
                     _row("ex08", "ranked", [180.0]), _row("yours-ex08", "ranked", [170.0]))
    assert lines["yours-ex04"] == ("yours-ex04: ranked 4 of 4, 100 img/s: 0.50x the solution's 200 img/s (ranked 1); "
                                   "revisit " + league_notebook.LESSONS["ex04"])
    assert "0.94x the solution's 180 img/s" in lines["yours-ex08"] and "level with the solution" in lines["yours-ex08"]
    assert "revisit" not in lines["yours-ex08"] and "yours-ex07" not in lines


def test_rejected_and_not_started_entries_say_why_and_where_to_look() -> None:
    lines = _lessons(_row("ex04", "ranked", [200.0]), _row("yours-ex04", "rejected", [300.0], "3 wrong labels"),
                     _row("ex07", "not installed", note="pip install -r requirements.txt"),
                     _row("yours-ex07", "not started", note="TODO(ex07, step 2)"))
    assert lines["yours-ex04"].startswith("yours-ex04: rejected (3 wrong labels); the solution's 200 img/s")
    assert lines["yours-ex04"].endswith("revisit " + league_notebook.LESSONS["ex04"])
    assert "not started (TODO(ex07, step 2)); the solution not installed; revisit module 05" in lines["yours-ex07"]


def test_an_entry_that_raises_reads_as_crashed() -> None:
    entry = league.Entry("broken", "a build that raises", "math:sqrt")
    result = league_notebook.in_this_process(entry, league.Setup(league.REPO_ROOT, league.REPO_ROOT), "check")
    assert result["status"] == "crashed" and result["note"].startswith("TypeError")


def test_the_league_runs_in_this_process() -> None:
    """Gate and time in the calling process: the stub reads "not started", a peer doing other work is rejected."""
    names = ["yours-ex01", "yours-ex04", "tutorial", "planted-skips-crop", *(c.name for c in entries.CEILINGS)]
    result = league.run_league("ci", 1, 12, names, log=lambda line: None, run_entry=league_notebook.in_this_process)
    rows = {row["name"]: row for row in result["rows"]}
    assert rows["yours-ex04"]["status"] == "not started" and "TODO(ex04" in rows["yours-ex04"]["note"]
    assert rows["yours-ex01"]["status"] == "not started" and "TODO(ex01, step 5)" in rows["yours-ex01"]["note"]
    assert rows["planted-skips-crop"]["status"] == "rejected"
    assert rows["tutorial"]["status"] == "ranked" and rows["tutorial"]["median"] > 0
    assert result["ceiling"] and result["window_ceiling"]
    assert "revisit module 01, section 5" in league_notebook.lessons(result)[0]
    assert "revisit module 04" in league_notebook.lessons(result)[1]


@pytest.mark.parametrize("profile, in_process", [("ci", True), ("workshop", False)])
def test_only_ci_runs_the_league_in_this_process(monkeypatch: pytest.MonkeyPatch, profile: str,
                                                 in_process: bool) -> None:
    calls = []
    monkeypatch.setattr(league, "run_league", lambda *args, **kwargs: calls.append((args, kwargs)))
    league_notebook.small_league(profile, 1, 8)
    (args, kwargs), = calls
    assert args[3] == league_notebook.NOTEBOOK_ENTRIES
    assert (kwargs.get("run_entry") is league_notebook.in_this_process) == in_process


def test_a_learners_copy_compares_with_no_solution() -> None:
    line, = league_notebook.lessons({"rows": [_row("ex04", "not installed", note=entries.SOLUTIONS_NOTE),
                                         _row("yours-ex04", "ranked", [150.0])]})
    assert line == "yours-ex04: ranked, 150 img/s; no solution to compare with (this copy of the course has no solutions/)"
