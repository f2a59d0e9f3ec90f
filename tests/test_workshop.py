"""Workshop and self-learner tools: progress, watch mode, reset, saved results, the scoreboard, the learner copy.

None of these tests times anything; the two that run the grader grade one untouched stub's first check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import collect, progress, reset, results, watch
from grader.catalog import exercises, find
from grader.hints import hint_for_check
from grader.learner_copy import write_copy
from grader.results import (CORRECT_HERE, FAIL, NOT_STARTED, PASS, SKIPPED, CheckResult, forget, read_results,
                            write_json)
from loaderlab.paths import REPO_ROOT

STUB = "ex02_threaded_prefetch"  # its first check needs no dataset: the cheapest stub to grade
FIRST_CHECK = "prefetcher_yields_every_item_in_order"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def _saved(path: Path, *entries: tuple[str, str, str, dict | None]) -> Path:
    """A results file holding (exercise, check, status, metrics) rows, written the way the grader writes it."""
    grouped: dict[str, list[CheckResult]] = {}
    for exercise, check, status, metrics in entries:
        grouped.setdefault(exercise, []).append(CheckResult(exercise, check, status, metrics=metrics))
    for rows in grouped.values():
        write_json(rows, "exercises", path, "fork")
    return path


# ---- the catalogue -----------------------------------------------------------------------------

def test_catalogue_reads_every_exercise_with_its_steps_and_notebook() -> None:
    found = exercises()
    assert [e.name for e in found] == sorted(p.stem.removeprefix("test_") for p in (REPO_ROOT / "grader").glob("test_ex*.py"))
    for exercise in found:
        assert exercise.checks and exercise.notebook, exercise.name
        assert [n for n, _, _ in exercise.steps()] == sorted({c.step for c in exercise.checks})
        assert all(c.timed for c in exercise.steps()[-1][2] if c.timed), exercise.name
    assert any(c.cuda_only for c in find("ex09").checks) and not any(c.cuda_only for c in find("ex02").checks)


# ---- progress ----------------------------------------------------------------------------------

def test_progress_of_a_fresh_clone_names_the_first_exercise_and_how_to_run_it(tmp_path: Path) -> None:
    text = "\n".join(progress.report(read_results(tmp_path / "missing.json")))
    assert f"0 of {len(exercises())} exercises done." in text
    assert "Next: ex01_profile_and_fix" in text and "01_sequential_baseline" in text and "make watch EX=ex01" in text
    assert "step 1: " in text, "steps are listed"
    odd = {"format": 2, "exercises": {"ex01_profile_and_fix": 3, STUB: {"checks": 7, "when": 5}}}
    assert f"0 of {len(exercises())} exercises done." in "\n".join(progress.report(odd)), "a damaged file reads as ungraded"


def test_progress_counts_done_exercises_and_points_at_the_first_open_check(tmp_path: Path) -> None:
    ex01, ex02, ex09 = find("ex01"), find("ex02"), find("ex09")
    rows = [(ex01.name, c.name, PASS, None) for c in ex01.checks]
    rows += [(ex02.name, c.name, PASS, None) for c in ex02.checks[:2]]
    rows += [(ex02.name, ex02.checks[2].name, FAIL, None)]
    rows += [(ex09.name, c.name, PASS if not c.cuda_only else SKIPPED, None) for c in ex09.checks]  # no GPU here
    text = "\n".join(progress.report(read_results(_saved(tmp_path / "r.json", *rows))))
    assert f"1 of {len(exercises())} exercises done." in text, "a CUDA-only check skipped here was not graded"
    assert f"{ex09.name:<30} {CORRECT_HERE} (4 checks not graded here: no reason given)" in text
    assert f"Next: {ex02.name}, step 1" in text and ex02.checks[2].name in text and "make watch EX=ex02" in text
    assert f"({CORRECT_HERE}): ex09" in text, "what would grade the rest is named"


def test_the_capstones_stub_failing_as_shipped_does_not_count_as_begun(tmp_path: Path) -> None:
    """Grading a fresh copy fails every check of exercise 11 (its stub is the complete script with its defects): the
    next thing to do is still exercise 01, not the capstone."""
    ex11 = find("ex11")
    rows = [(ex11.name, c.name, FAIL, None) for c in ex11.checks if not c.timed]
    rows += [(e.name, c.name, NOT_STARTED, None) for e in exercises() if e.name != ex11.name for c in e.checks]
    text = "\n".join(progress.report(read_results(_saved(tmp_path / "r.json", *rows))))
    assert "Next: ex01_profile_and_fix" in text, text[-600:]
    assert progress.untouched(ex11) and not progress.untouched(find("ex01"))
    edited = tmp_path / "exercises"
    edited.mkdir()
    (edited / f"{ex11.name}.py").write_text((REPO_ROOT / "exercises" / f"{ex11.name}.py").read_text() + "# begun\n")
    assert not progress.untouched(ex11, edited), "an edited capstone script is begun"


# ---- saved results -----------------------------------------------------------------------------

def test_results_keep_the_learners_name_across_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.json"
    monkeypatch.setenv("LOADERLAB_LEARNER", "Ada")
    write_json([CheckResult("ex01_profile_and_fix", "a", FAIL)], "exercises", path, "fork")
    monkeypatch.delenv("LOADERLAB_LEARNER")
    write_json([CheckResult("ex02_threaded_prefetch", "b", PASS)], "exercises", path, "spawn")
    payload = read_results(path)
    assert payload["learner"] == "Ada" and set(payload["exercises"]) == {"ex01_profile_and_fix", "ex02_threaded_prefetch"}
    entry = payload["exercises"]["ex02_threaded_prefetch"]
    assert entry["start_method"] == "spawn" and entry["machine"]["usable_cores"] >= 1 and entry["when"]


def test_course_commit_outside_a_git_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enclosing = tmp_path / "other-repo"
    (enclosing / "course").mkdir(parents=True)
    _git(enclosing, "init", "-q")
    _git(enclosing, "commit", "-q", "--allow-empty", "-m", "someone else's")
    monkeypatch.setattr(results, "REPO_ROOT", enclosing / "course")
    monkeypatch.setattr(results, "COURSE_COMMIT_FILE", enclosing / "course" / "COURSE_COMMIT")
    assert results.course_commit() is None, "an enclosing repository's commit is not the course's"
    (enclosing / "course" / "COURSE_COMMIT").write_text("abc1234\n")
    assert results.course_commit() == "abc1234", "a learner copy's recorded commit"


def test_forget_clears_one_exercise_and_keeps_the_others(tmp_path: Path) -> None:
    path = _saved(tmp_path / "r.json", ("ex01_profile_and_fix", "a", PASS, None), (STUB, "b", FAIL, None))
    assert forget(path, [STUB, "ex03_process_loader"]) == [STUB]
    assert set(read_results(path)["exercises"]) == {"ex01_profile_and_fix"}


# ---- reset -------------------------------------------------------------------------------------

@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A git repository holding the real ex02 stub, as a clone of the course would."""
    root = tmp_path / "course"
    (root / "exercises").mkdir(parents=True)
    (root / "exercises" / f"{STUB}.py").write_bytes((REPO_ROOT / "exercises" / f"{STUB}.py").read_bytes())
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "course")
    return root


def test_reset_restores_the_stub_byte_for_byte_and_clears_its_results(course: Path, tmp_path: Path) -> None:
    stub_path = course / "exercises" / f"{STUB}.py"
    stub = stub_path.read_bytes()
    stub_path.write_text("class ThreadedPrefetcher:\n    pass  # my work\r\n")
    saved = _saved(tmp_path / "r.json", (STUB, "b", FAIL, None), ("ex01_profile_and_fix", "a", PASS, None))
    assert reset.reset([find("ex02")], saved, assume_yes=True, root=course)
    assert stub_path.read_bytes() == stub
    assert set(read_results(saved)["exercises"]) == {"ex01_profile_and_fix"}


def test_reset_asks_first_and_leaves_the_work_when_nobody_answers(course: Path, tmp_path: Path) -> None:
    stub_path = course / "exercises" / f"{STUB}.py"
    stub_path.write_text("# my work\n")
    saved = _saved(tmp_path / "r.json", (STUB, "b", FAIL, None))
    assert not reset.reset([find("ex02")], saved, root=course), "no terminal and no --yes: nothing is reset"
    assert stub_path.read_text() == "# my work\n" and STUB in read_results(saved)["exercises"]


def test_reset_prefers_the_course_start_tag_over_the_learners_commits(course: Path, tmp_path: Path) -> None:
    stub_path = course / "exercises" / f"{STUB}.py"
    stub = stub_path.read_bytes()
    _git(course, "tag", reset.START_TAG)
    stub_path.write_text("# my committed work\n")
    _git(course, "commit", "-q", "-am", "my work")
    assert reset.reset([find("ex02")], tmp_path / "none.json", assume_yes=True, root=course)
    assert stub_path.read_bytes() == stub


# ---- the scoreboard ----------------------------------------------------------------------------

def _learner(folder: Path, name: str, ratio: float, status: str = PASS, free: float | None = 1.9) -> None:
    metrics = {"name": "reads", "candidate_ips": 10 * ratio, "baseline_ips": 10.0, "ratio": ratio, "target": 3.0,
               "cores": 2, "free_cores": free, "passed": ratio >= 3.0}
    path = folder / f"{name}.json"
    write_json([CheckResult(STUB, c.name, status, metrics=metrics, timed=True) if c.name == "io_reads_with_threads"
                else CheckResult(STUB, c.name, PASS) for c in find(STUB).checks], "exercises", path, "fork")
    payload = json.loads(path.read_text())
    payload["learner"] = name
    path.write_text(json.dumps(payload))


def test_scoreboard_gathers_a_room_flags_outliers_and_skips_bad_files(tmp_path: Path) -> None:
    room = tmp_path / "room"
    (room / "seat-4").mkdir(parents=True)
    for name, ratio in (("ana", 7.0), ("ben", 7.4), ("chi", 6.8), ("dev", 2.9)):
        _learner(room if name != "dev" else room / "seat-4", name, ratio, PASS if ratio > 3 else FAIL, 1.0)
    (room / "truncated.json").write_text('{"format": 2, "exercises": {')
    (room / "foreign.json").write_text('{"name": "a package.json"}')
    (room / "old.json").write_text('{"format": 1, "exercises": {}}')
    (room / "odd.json").write_text('{"format": 2, "learner": "<b>odd|one</b>", "exercises": {}}')
    (room / "malformed.json").write_text('{"format": 2, "exercises": {"ex01": {"checks": 5}, "ex02": [1]}}')
    (room / "binary.json").write_bytes(b"\x89PNG\r\n\x00\xff")
    out = tmp_path / "board"
    collect.main([str(room), str(tmp_path / "absent"), "--out", str(out)])
    learners, problems = collect.gather([room, tmp_path / "absent"])
    assert sorted(l.name for l in learners) == ["<b>odd|one</b>", "ana", "ben", "chi", "dev"]
    assert len(problems) == 6 and all("skipped" in p or "no such" in p for p in problems)
    board = collect.build(learners, problems)
    key = (STUB, "io_reads_with_threads")
    assert board.medians[key] == pytest.approx(6.9)
    flagged = {l.name: board.outlier(l, key) for l in learners}
    assert flagged == {"ana": "", "ben": "", "chi": "", "dev": "low", "<b>odd|one</b>": ""}
    markdown, page = (out / "scoreboard.md").read_text(), (out / "scoreboard.html").read_text()
    for text in (markdown, page):
        assert "2.90x" in text and "6.90x" in text and "truncated.json" in text and "2 (1.0 free)" in text
    assert "**!** low" in markdown and "outlier" in page and "3 of 5" in markdown
    assert "&lt;b&gt;odd|one" in page and "&lt;b&gt;odd\\|one&lt;/b&gt;" in markdown, "a learner's name is escaped"
    assert "http" not in page.replace('lang="en"', "") and "<script" not in page, "no external assets"


def test_make_grade_ex_grades_that_exercise_only() -> None:
    """`make grade EX=ex11` (exercise 11's docstring) runs that grader file alone; a name that fits none stops."""
    def dry_run(*variables: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-n", "--no-print-directory", "grade", *variables], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60)

    assert dry_run("EX=ex11").stdout.strip().endswith("-m pytest grader/test_ex11_training_script.py")
    assert dry_run("EX=ex02_threaded_prefetch").stdout.strip().endswith("grader/test_ex02_threaded_prefetch.py")
    assert dry_run().stdout.strip().endswith("-m pytest grader/")
    refused = dry_run("EX=ex1")
    assert refused.returncode != 0 and "EX=ex1 names no exercise" in refused.stderr and "ex13" in refused.stderr


# ---- watch mode and the learner copy (these run the grader on one stub check) -------------------

def _read_until(process: subprocess.Popen, needle: str, seen: list[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return
    raise AssertionError(f"no {needle!r} within {timeout_s} s; watch printed:\n{''.join(seen)}")


def test_watch_regrades_after_a_save_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    exercise_file = target / f"{STUB}.py"
    exercise_file.write_bytes((REPO_ROOT / "exercises" / f"{STUB}.py").read_bytes())
    command = [sys.executable, "-m", "grader.watch", "ex02", "--target", str(target), "--results",
               str(tmp_path / "r.json"), "--correctness-only"]
    watcher = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=os.environ | {"PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"})
    seen: list[str] = []
    try:
        _read_until(watcher, "waiting for the next save", seen)
        exercise_file.write_text(exercise_file.read_text() + "\n# saved again\n")
        _read_until(watcher, "waiting for the next save", seen)
        watcher.send_signal(signal.SIGINT)
        rest, _ = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    text = "".join(seen) + rest
    assert text.count("grading ex02_threaded_prefetch") == 2, text
    assert f"first failing: step 1 (prefetcher: in order), `{FIRST_CHECK}` (not started)" in text
    assert "02_threading.ipynb teaches it" in text and "hint:" not in text, "a stub gets no hint, only where to start"
    assert "watch stopped." in text and watcher.returncode == 0
    assert read_results(tmp_path / "r.json")["exercises"][STUB]["status"] == NOT_STARTED


def test_watch_shows_the_hint_of_the_first_failing_check_once_work_has_begun() -> None:
    entry = {"status": FAIL, "checks": [
        {"check": FIRST_CHECK, "status": PASS, "step": 1, "step_title": "prefetcher: in order"},
        {"check": "prefetcher_is_bounded", "status": FAIL, "message": "it ran 9 items ahead at depth 3",
         "step": 2, "step_title": "prefetcher: robust"}]}
    text = "\n".join(watch.verdict(find("ex02"), entry))
    assert "1 check(s) pass; first failing: step 2 (prefetcher: robust), `prefetcher_is_bounded` (fail)" in text
    assert "it ran 9 items ahead" in text and f"hint: {hint_for_check(STUB, 'prefetcher_is_bounded')}" in text


def test_learner_copy_has_no_answers_and_still_grades(tmp_path: Path) -> None:
    dest = tmp_path / "handout"
    write_copy(dest)
    assert not (dest / "solutions").exists() and not (dest / "tests").exists()
    assert (dest / "exercises" / f"{STUB}.py").read_bytes() == (REPO_ROOT / "exercises" / f"{STUB}.py").read_bytes()
    assert (dest / "COURSE_COMMIT").read_text().strip()
    done = subprocess.run([sys.executable, "-m", "pytest", f"grader/test_{STUB}.py", "-k", FIRST_CHECK,
                           "--results", str(tmp_path / "r.json")], cwd=dest, capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": str(dest)}, timeout=120)
    assert "not started" in done.stdout, done.stdout + done.stderr
    saved = read_results(tmp_path / "r.json")["exercises"][STUB]
    assert saved["status"] == NOT_STARTED and saved["commit"] == (dest / "COURSE_COMMIT").read_text().strip()
