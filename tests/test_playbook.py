"""The playbook (`python -m grader.playbook`, make playbook): built from a synthetic results file written by the
grader's own writer, a synthetic capstone run and synthetic machine facts, in a temporary folder.

Each section is checked for its figures and for naming the command that makes a missing one; a corrupt capstone
file, a missing results file and a machine without a GPU are covered. Nothing here is timed.
"""

from __future__ import annotations

import datetime
import json
import re
import string
from pathlib import Path
from typing import Any

import pytest

from grader import playbook
from grader.catalog import exercises
from grader.results import FAIL, NOT_STARTED, PASS, CheckResult, read_results, write_json
from loaderlab.bench import Comparison
from loaderlab.tools.doctor import TENSORFLOW, Report

WHEN = datetime.datetime(2026, 11, 22, 13, 5, tzinfo=datetime.timezone.utc)
MACHINE = {"python": "3.11.7", "platform": "Linux-test", "usable_cores": 2, "cpu_count": 2, "ram_gib": 23.5,
           "shm_gib": 0.06, "start_method": "fork"}


def doctor(gpu: str = "none (the course emulates the accelerator step)") -> Report:
    return Report(facts=[("python", "3.11.7"), ("torch", "2.14.1"), ("torchvision", "0.29.1"), (TENSORFLOW, "2.21.0"),
                         ("GPU", gpu)],
                  warnings=["/dev/shm is 64 MiB: DataLoader workers and shared memory may die with 'bus error'."])


def timed(exercise: str, check: str, ratio: float, target: float, name: str = "candidate",
          baseline_name: str = "baseline", free: float | None = 1.9) -> CheckResult:
    metrics = Comparison(name, baseline_name, baseline_ips=100.0, candidate_ips=100.0 * ratio, ratio=ratio,
                         ratio_min=ratio - 0.1, ratio_max=ratio + 0.1, rounds=3, cores=2, unit="images",
                         target=target, free_cores=free).to_dict()
    return CheckResult(exercise, check, PASS if ratio >= target else FAIL, "", 1.0, metrics, timed=True)


def correct(exercise: str, check: str, status: str = PASS) -> CheckResult:
    return CheckResult(exercise, check, status, "", 0.5)


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    """ex01 not started, ex02 timed and passing, ex04 correct but not timed, ex05 a worker count chosen,
    ex08 timed below its target; every other exercise not graded."""
    path = tmp_path / "results.json"
    ex02 = next(e for e in exercises() if e.short == "ex02")
    checks = [correct("ex01_profile_and_fix", "profile_times_each_stage", NOT_STARTED),
              CheckResult("ex01_profile_and_fix", "faster_than_naive", NOT_STARTED, "not timed", timed=True),
              *[correct(ex02.name, check.name) for check in ex02.checks if not check.timed],
              timed("ex02_threaded_prefetch", "io_reads_with_threads", 6.12, 5.0),
              timed("ex02_threaded_prefetch", "prefetch_overlaps_compute", 1.92, 1.6, free=None),
              correct("ex04_fast_dataloader", "one_sample_matches_the_reference"),
              timed("ex05_choose_workers", "real_sweep_choice_is_near_the_best", 0.97, 0.75,
                    "your choice, 2 workers", "the best, 3 workers"),
              timed("ex08_shards", "shards_beat_one_request_per_file", 2.4, 3.0, free=1.2)]
    write_json(checks, "exercises", path, "fork")
    return path


def capstone_run(accuracies: list[float] = [0.42, 0.61, 0.70, 0.69, 0.70]) -> dict[str, Any]:
    return {"profile": "ci", "settings": {"num_workers": 2, "batch_size": 32},
            "records": [{"epoch": i + 1, "wall_s": 30.0 * (i + 1), "val_accuracy": accuracy,
                         "images_per_s": 400.0 + 10 * i, "stall_fraction": [0.05, 0.03, 0.04, 0.20, 0.02][i]}
                        for i, accuracy in enumerate(accuracies)]}


def build(results: Path, capstone: Path, gpu: str | None = None, profile: str = "ci") -> playbook.Page:
    report = doctor() if gpu is None else doctor(gpu)
    return playbook.build(read_results(results), results, capstone, MACHINE, report, WHEN, "abc1234", profile)


def section(page: playbook.Page, title: str) -> playbook.Section:
    return next(s for s in page.sections if s.title.startswith(title))


def text(section: playbook.Section) -> str:
    return "\n".join(section.lines + [" | ".join(row) for row in section.rows] + section.notes)


def test_the_page_says_when_which_commit_and_which_profile(results_file: Path, tmp_path: Path) -> None:
    page = build(results_file, tmp_path / "absent.json", profile="workshop")
    assert "2026-11-22 13:05 UTC" in page.lines[0] and "abc1234" in page.lines[0] and "workshop" in page.lines[0]
    assert page.lines[1].startswith(f"1 of {len(exercises())} exercises done")


def test_machine_section_has_the_facts_the_doctor_versions_and_its_warnings(results_file: Path, tmp_path: Path) -> None:
    machine = text(section(build(results_file, tmp_path / "absent.json"), "This machine"))
    for fact in ("usable cores | 2", "memory | 23.5 GiB", "/dev/shm | 0.06 GiB", "torch | 2.14.1",
                 f"{TENSORFLOW} | 2.21.0", "GPU | none", "start method | fork"):
        assert fact in machine
    assert "bus error" in machine


def test_no_gpu_says_the_cuda_checks_cannot_run_here(results_file: Path, tmp_path: Path) -> None:
    page = build(results_file, tmp_path / "absent.json")
    assert "CUDA-only checks of ex09 and ex10 cannot run" in text(section(page, "This machine"))
    ungraded = page.closing[0].split("not graded: ")[1].split(" (")[0]
    assert "ex09" in ungraded and "ex10" in ungraded, "ex09 and ex10 were not graded at all: that comes first"
    assert "CUDA GPU only" not in page.closing[0]


def test_with_a_gpu_a_missing_cuda_figure_is_for_make_grade(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_json([correct("ex09_device_prefetcher", "batches_match_direct_normalisation")], "exercises", path, "fork")
    without = build(path, tmp_path / "absent.json")
    assert "timed on a CUDA GPU only: ex09" in without.closing[0]
    assert "overlap_beats_copy_then_compute" not in without.closing[0]
    with_gpu = build(path, tmp_path / "absent.json", gpu="NVIDIA H100 80GB HBM3")
    assert "No GPU" not in text(section(with_gpu, "This machine"))
    assert "ex09 overlap_beats_copy_then_compute (no figure yet)" in with_gpu.closing[0]


def test_timed_checks_show_their_figures_and_what_they_say_to_do(results_file: Path, tmp_path: Path) -> None:
    figures = section(build(results_file, tmp_path / "absent.json"), "Your figures")
    assert figures.rows[:2] == [["ex02", "io_reads_with_threads", "6.12x ok", "5.00x", "2 cores (1.9 free)"],
                                ["ex02", "prefetch_overlaps_compute", "1.92x ok", "1.60x", "2 cores"]]
    assert "8 threads read 6.12x" in figures.notes[0]
    assert "made the emulated training loop 1.92x as fast" in figures.notes[1]
    assert figures.chart.startswith("<svg") and "6.12x" in figures.chart, "the ratios drawn against their targets"


def test_the_worker_count_exercise_05_chose_is_what_to_use(results_file: Path, tmp_path: Path) -> None:
    page = build(results_file, tmp_path / "absent.json")
    chosen = section(page, "What you chose")
    assert ["DataLoader workers (exercise 05's chooser)", "num_workers=2", "0.97x ok vs the best, 3 workers"] in \
        chosen.rows
    assert ["worker start method", "fork", "grades saved under it; this machine's default: fork"] in chosen.rows
    figures = text(section(page, "Your figures"))
    assert "Use num_workers=2 on this machine" in figures and "best count (3)" in figures


def test_below_target_says_so_with_the_hint(results_file: Path, tmp_path: Path) -> None:
    page = build(results_file, tmp_path / "absent.json")
    figures = text(section(page, "Your figures"))
    assert "2.40x below" in figures and "below its 3.00x target" in figures and "`make hint EX=ex08 CHECK=shards_beat_one_request_per_file LEVEL=2`" in figures
    assert "busy during some timing: as few as 1.2 of 2 cores" in "\n".join(page.lines)


def test_missing_figures_name_the_command_that_measures_them(results_file: Path, tmp_path: Path) -> None:
    page = build(results_file, tmp_path / "absent.json")
    assert len(page.closing) == 1, "what is missing is one closing line"
    closing = page.closing[0]
    assert "ex04 twice_the_tutorial_configuration (no figure yet)" in closing
    assert "ex01 faster_than_naive (not started)" in closing
    assert "not graded: ex03, ex06, ex07" in closing and "`make grade`" in closing
    assert "no league run (`make league`)" in closing and "no capstone run (`make capstone`)" in closing
    assert not any("not graded" in " ".join(row) for s in page.sections for row in s.rows), "no rows of nothing"


def test_missing_results_file_names_make_grade_everywhere(tmp_path: Path) -> None:
    page = build(tmp_path / "no-results.json", tmp_path / "absent.json")
    assert "No saved grades" in page.lines[1] and "`make grade`" in page.lines[1]
    assert [s.title for s in page.sections] == ["This machine"], "a figure was invented"
    assert "not graded: " + ", ".join(e.short for e in exercises()) + " (`make grade`" in page.closing[0]


def test_capstone_section_reports_accuracy_time_to_it_stall_and_throughput(results_file: Path, tmp_path: Path) -> None:
    capstone = tmp_path / "capstone.json"
    capstone.write_text(json.dumps(capstone_run()))
    run = section(build(results_file, capstone), "Capstone")
    rows = dict(run.rows)
    assert rows["final validation accuracy"] == "70.0% after epoch 5, 150 s"
    assert rows["time to reach it"] == "90 s (epoch 3)"
    assert rows["data-stall fraction"] == "4.0% (epochs ranged 2.0%-20.0%)"
    assert rows["training throughput"] == "420 images/s (epochs ranged 400-440 images/s)"
    assert "best validation accuracy" not in rows
    assert "num_workers=2" in run.lines[0] and "profile ci" in run.lines[0]
    assert "no faster loader can save more than that share" in run.notes[1]


def test_capstone_on_another_profile_says_so(results_file: Path, tmp_path: Path) -> None:
    capstone = tmp_path / "capstone.json"
    capstone.write_text(json.dumps(capstone_run([0.5, 0.72, 0.7, 0.6, 0.65])))
    run = section(build(results_file, capstone, profile="workshop"), "Capstone")
    assert dict(run.rows)["best validation accuracy"] == "72.0% at epoch 2, 60 s"
    assert "This run used the ci profile" in run.notes[-1]


def test_missing_capstone_names_make_capstone(results_file: Path, tmp_path: Path) -> None:
    page = build(results_file, tmp_path / "absent.json")
    assert not any(s.title.startswith("Capstone") for s in page.sections), "nothing to show: no section"
    assert "no capstone run (`make capstone`)" in page.closing[0]


@pytest.mark.parametrize("content, why", [
    ("{not json", "is not valid JSON"),
    (json.dumps({"profile": "ci", "records": []}), "holds no epoch records"),
    (json.dumps([1, 2]), "holds no epoch records"),
    (json.dumps({"records": [{"epoch": 1, "wall_s": 3.0, "val_accuracy": "high", "images_per_s": 1.0,
                              "stall_fraction": 0.1}]}), "val_accuracy is 'high'"),
    (json.dumps({"records": [{"epoch": 1, "wall_s": 3.0, "val_accuracy": 71.0, "images_per_s": 1.0,
                              "stall_fraction": 0.1}]}), "not a number in 0..1"),
    (json.dumps({"records": [{"wall_s": 3.0}]}), "not a whole number"),
])
def test_a_corrupt_capstone_file_is_left_out_saying_why(results_file: Path, tmp_path: Path, content: str,
                                                        why: str) -> None:
    capstone = tmp_path / "capstone.json"
    capstone.write_text(content)
    run = section(build(results_file, capstone), "Capstone")
    assert not run.rows and why in run.lines[0] and "`make capstone`" in run.lines[0]


def test_markdown_and_html_escape_what_a_learner_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADERLAB_LEARNER", "<b>Ada | L.</b>")
    path = tmp_path / "results.json"
    write_json([timed("ex08_shards", "shards_beat_one_request_per_file", 3.5, 3.0, name="a | b")],
               "exercises", path, "fork")
    page = build(path, tmp_path / "absent.json")
    page.sections[2].rows.append(["x | y"] + ["-"] * 8)
    markdown = playbook.markdown(page)
    assert "x \\| y" in markdown and markdown.startswith("# Your loaderlab playbook\n")
    html = playbook.page_html(page)
    assert "<b>Ada" not in html and "&lt;b&gt;Ada" in html and "<code>make grade</code>" in html


def test_main_writes_markdown_and_html(results_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(playbook, "diagnose", doctor)
    monkeypatch.setattr(playbook, "facts", lambda: MACHINE)
    out = tmp_path / "out"
    playbook.main(["--results", str(results_file), "--capstone", str(tmp_path / "absent.json"),
                   "--league", str(tmp_path / "absent-league.json"), "--out", str(out)])
    markdown = (out / "playbook.md").read_text()
    assert markdown.index("## What you chose") < markdown.index("## Your figures") < markdown.index("## This machine")
    assert markdown.rstrip().splitlines()[-1].startswith("Not yet on this page: ")
    assert (out / "playbook.html").read_text().startswith("<!doctype html>")


def test_every_lesson_names_a_timed_check_and_fills_in() -> None:
    timed_checks = {(e.name, c.name) for e in exercises() for c in e.checks if c.timed}
    assert set(playbook.LESSONS) <= timed_checks, "a lesson for a check that is not a timed check"
    known = {"ratio", "cores", "name", "baseline_name", "chosen", "best"}
    for lesson in [*playbook.LESSONS.values(), playbook.GENERIC_LESSON]:
        assert {f for _, f, _, _ in string.Formatter().parse(lesson) if f} <= known, lesson


def test_a_timed_check_without_a_lesson_gets_the_plain_sentence() -> None:
    metrics = timed("ex11_training_script", "twice_the_original", 2.31, 2.0, "fixed script", "original script").metrics
    assert playbook._figures("ex11_training_script", "twice_the_original", metrics) == (
        "ex11: fixed script ran 2.31x as fast as original script, on 2 cores (1.9 free).")
    unnamed = timed("ex05_choose_workers", "real_sweep_choice_is_near_the_best", 0.9, 0.75, "your pick").metrics
    assert "num_workers" not in playbook._figures("ex05_choose_workers", "real_sweep_choice_is_near_the_best", unnamed)


def test_epochs_where_nothing_measured_the_stall_are_left_out_of_it(results_file: Path, tmp_path: Path) -> None:
    run = capstone_run()
    for record in run["records"][:3]:
        record["stall_fraction"] = None
    capstone = tmp_path / "capstone.json"
    capstone.write_text(json.dumps(run))
    assert dict(section(build(results_file, capstone), "Capstone").rows)["data-stall fraction"] == \
        "11.0% (epochs ranged 2.0%-20.0%)"
    for record in run["records"]:
        record["stall_fraction"] = None
    capstone.write_text(json.dumps(run))
    unmeasured = section(build(results_file, capstone), "Capstone")
    assert dict(unmeasured.rows)["data-stall fraction"] == "not measured in this run"
    assert not any("waited for its batch" in note for note in unmeasured.notes)


def test_reads_what_the_capstone_writes(tmp_path: Path) -> None:
    """The file format is loaderlab.training.TrainingRun.to_dict(): a run written by it reads back whole."""
    training = pytest.importorskip("loaderlab.training", reason="the capstone's loaderlab.training is not here yet")
    records = [training.EpochRecord(1, 31.5, 0.5, 410.0, 0.1), training.EpochRecord(2, 60.0, 0.625, 420.0)]
    run = training.TrainingRun(records, "ci", {"num_workers": 2, "device": "cpu"})
    capstone = tmp_path / "capstone.json"
    capstone.write_text(json.dumps(run.to_dict()))
    read = playbook.read_capstone(capstone)
    assert (read.profile, read.settings) == ("ci", {"num_workers": 2, "device": "cpu"})
    assert read.epochs == (playbook.Epoch(1, 31.5, 0.5, 410.0, 0.1), playbook.Epoch(2, 60.0, 0.625, 420.0, None))
    assert read.epochs[-1].wall_s == training.time_to_accuracy(run, run.final_accuracy)


def test_a_damaged_results_file_gives_a_page_without_invented_figures(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    half_metrics = {"name": "x", "ratio": "fast", "candidate_ips": 3.0, "cores": "two", "free_cores": "?"}
    path.write_text(json.dumps({"format": 2, "machine": [], "exercises": {
        "ex01_profile_and_fix": "passed",
        "ex02_threaded_prefetch": {"checks": [7, {"check": "io_reads_with_threads", "status": PASS,
                                                  "metrics": half_metrics}]},
        "ex03_process_loader": {"checks": "none"}}}))
    page = build(path, tmp_path / "absent.json")
    assert not any(s.title == "Your figures" for s in page.sections), "a figure was invented"
    assert "ex02 io_reads_with_threads (passed, no figure saved)" in page.closing[0]
    assert "not graded: ex01," in page.closing[0]


# ---- the league, the charts, and the page in a browser ----------------------------------------------------------

def league_file(path: Path, rows: list[tuple[str, float]] = [("ex04", 583.0), ("yours-ex04", 540.0),
                                                              ("tutorial", 120.0)]) -> Path:
    league = {"profile": "ci", "rounds": 3, "images": 640, "batch_size": 64, "cores": 2, "date": "2026-11-25",
              "ceiling": 998.0, "rows": [{"name": name, "title": name, "status": "ranked", "note": "",
                                          "images_per_s": [median * 0.9, median, median * 1.1], "median": median,
                                          "yours": name.startswith("yours-")}
                                         for name, median in rows]}
    path.write_text(json.dumps(league))
    return path


def test_the_league_shows_your_loaders_highlighted_against_the_ceiling(results_file: Path, tmp_path: Path) -> None:
    page = playbook.build(read_results(results_file), results_file, tmp_path / "absent.json", MACHINE, doctor(), WHEN,
                          "abc1234", "ci", league_file(tmp_path / "league.json"))
    league = section(page, "Your loaders in the league table")
    assert league.rows == [["ex04", "583", "58%"], ["yours-ex04 (yours)", "540", "54%"], ["tutorial", "120", "12%"]]
    assert league.chart.count('class="yours"') == 1 and 'class="ceiling"' in league.chart
    assert "league" not in page.closing[0]


@pytest.mark.parametrize("content", ["{not json", json.dumps({"rows": "none"}),
                                     json.dumps({"rows": [{"name": "x", "median": "fast"}]})])
def test_a_corrupt_league_file_is_left_out_saying_why(results_file: Path, tmp_path: Path, content: str) -> None:
    path = tmp_path / "league.json"
    path.write_text(content)
    page = playbook.build(read_results(results_file), results_file, tmp_path / "absent.json", MACHINE, doctor(), WHEN,
                          "abc1234", "ci", path)
    league = section(page, "Your loaders in the league table")
    assert not league.rows and not league.chart and "`make league`" in league.lines[0]


def test_the_capstone_draws_accuracy_against_wall_time(results_file: Path, tmp_path: Path) -> None:
    capstone = tmp_path / "capstone.json"
    capstone.write_text(json.dumps(capstone_run()))
    page = build(results_file, capstone)
    run = section(page, "Capstone")
    assert run.chart.count("<circle") == 5 and "150 s" in run.chart
    assert "capstone training run" in [row[0] for row in section(page, "What you chose").rows]


def _everything_graded(tmp_path: Path) -> playbook.Page:
    """Every timed check of the course with a figure (ratios invented for the layout), a league and a capstone run."""
    path = tmp_path / "results.json"
    checks = []
    for number, exercise in enumerate(exercises()):
        for check in exercise.checks:
            checks.append(timed(exercise.name, check.name, 1.5 + number / 5, 1.5, "your choice, 2 workers",
                                "the best, 3 workers") if check.timed else correct(exercise.name, check.name))
    write_json(checks, "exercises", path, "fork")
    capstone = tmp_path / "capstone.json"
    capstone.write_text(json.dumps(capstone_run()))
    return playbook.build(read_results(path), path, capstone, MACHINE, doctor(), WHEN, "abc1234", "ci",
                          league_file(tmp_path / "league.json"))


def test_a_browser_prints_the_whole_playbook_on_one_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         headless_browser) -> None:
    monkeypatch.setenv("LOADERLAB_LEARNER", "<img src=x onerror=\"document.title='pwned'\">")
    page = _everything_graded(tmp_path)
    html_path = tmp_path / "playbook.html"
    html_path.write_text(playbook.page_html(page))
    dom = headless_browser(html_path, screenshot=tmp_path / "playbook.png", width=1000, height=1800,
                           pdf=tmp_path / "playbook.pdf")
    assert "pwned" not in dom.split("</title>")[0] and "<img" not in dom, "the learner's name stays text"
    assert dom.count("<svg") == 3, "three charts: the figures, the league, the capstone"
    printed = (tmp_path / "playbook.pdf").read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page[^s]", printed))
    assert pages == 1, f"every timed check graded, a league and a capstone run print on {pages} pages, not one"


def test_the_capstones_stall_and_accuracy_figures_show_with_their_limits(tmp_path: Path) -> None:
    """Figures against a limit are found by their kind (`Measured`), whatever the capstone's timed checks are called;
    the closing line never calls a figure the page shows missing."""
    from grader.results import Measured

    path = tmp_path / "results.json"
    stall = Measured("data stall, 10 batches (a short run)", 0.04, 0.3, at_most=True).to_dict()
    accuracy = Measured("val accuracy, 12 epochs (ci's short run)", 0.31, 0.25, at_most=False,
                        note="mean of the last 3; time to 25%: 5.1 s").to_dict()
    ex11 = next(e for e in exercises() if e.short == "ex11")
    first, second = [check.name for check in ex11.checks if check.timed][-2:]
    write_json([CheckResult(ex11.name, first, PASS, "", 1.0, stall, timed=True),
                CheckResult(ex11.name, second, PASS, "", 1.0, accuracy, timed=True)], "exercises", path, "fork")
    page = build(path, tmp_path / "absent.json")
    figures = text(section(page, "Your figures"))
    assert "4% (data stall, 10 batches (a short run)) ok" in figures and "at most 30%" in figures
    assert "31% (val accuracy, 12 epochs (ci's short run)) ok" in figures and "at least 25%" in figures
    assert "time to 25%: 5.1 s" in figures
    closing = " ".join(page.closing)
    assert f"ex11 {first}" not in closing and f"ex11 {second}" not in closing, closing


def test_an_untimed_checks_figure_against_a_limit_shows_too(tmp_path: Path) -> None:
    """Exercise 16's hung-rank job saves the seconds from the hang to the restart against its limit: a figure of the
    learner's machine, shown with the timed ones though the check is not timed."""
    from grader.results import Measured

    path = tmp_path / "results.json"
    waited = Measured("seconds from a hung rank to the restarted ranks", 17.5, 35.0, at_most=True, percent=False,
                      note="STEP_TIMEOUT_S 10 s, then torchrun's restart").to_dict()
    write_json([CheckResult("ex16_elastic_epochs", "a_hung_rank_is_given_up_within_the_timeout", PASS, "", 30.0,
                            waited)], "exercises", path, "fork")
    figures = text(section(build(path, tmp_path / "absent.json"), "Your figures"))
    assert "17.5 (seconds from a hung rank to the restarted ranks) ok" in figures and "at most 35" in figures
