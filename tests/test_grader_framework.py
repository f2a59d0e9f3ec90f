"""The grader's own machinery: it judges and touches only what the graded code made, stops runaways,
explains crashes, merges results, and its summary says what to do next."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from grader import child, hints, preload, progress, quiz
from grader.catalog import find
from grader.learner_copy import write_copy
from grader.results import (CORRECT_HERE, CORRECT_UNTIMED, DONE, ERROR, FAIL, IN_PROGRESS, LEARNER_RESULTS, NOT_RUN,
                            NOT_STARTED, NOT_TIMED, OTHER_TARGETS, PARTLY_RUN, PASS, SKIPPED, CheckResult, Measured,
                            read_results, results_file, status_of, summary_lines, write_json)
from grader.runner import MEMORY_CAP_ENV, run_check
from grader.support import SHM_DIR, pipe_traffic
from loaderlab.machine import free_cores, usable_cores
from loaderlab.paths import REPO_ROOT

needs_dev_shm = pytest.mark.skipif(not SHM_DIR.is_dir(), reason="this platform has no /dev/shm")

# Another program: waits for the trigger file, then makes a named segment that outlives it.
OTHER_PROGRAM = textwrap.dedent("""
    import sys, time
    from multiprocessing import resource_tracker, shared_memory
    trigger, name = sys.argv[1], sys.argv[2]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            open(trigger).close()
            break
        except FileNotFoundError:
            time.sleep(0.02)
    segment = shared_memory.SharedMemory(name=name, create=True, size=4096)
    resource_tracker.unregister(segment._name, "shared_memory")  # it belongs to no one here: let it outlive us
    segment.close()
""")

# The reference solution, made to wait inside the check until the other program's segment exists.
WAITS_FOR_THE_OTHER_PROGRAM = textwrap.dedent("""
    import os, time
    from solutions.{exercise} import *
    from solutions.{exercise} import {name} as Reference

    class {name}(Reference):
        def __init__(self, *args, **kwargs):
            if not os.path.exists({trigger!r}):
                open({trigger!r}, "w").close()
                deadline = time.monotonic() + 30
                while not os.path.exists({segment!r}) and time.monotonic() < deadline:
                    time.sleep(0.02)
            super().__init__(*args, **kwargs)
""")


@needs_dev_shm
@pytest.mark.parametrize("exercise, name, check", [
    ("ex02_threaded_prefetch", "ThreadedPrefetcher", "prefetcher_yields_every_item_in_order"),
    ("ex03_process_loader", "ProcessLoader", "batches_match_sequential_reference"),
])
def test_another_programs_segment_is_neither_judged_nor_deleted(tmp_path: Path, exercise: str, name: str,
                                                               check: str) -> None:
    segment = f"loaderlab-test-foreign-{os.getpid()}-{exercise[:4]}"
    trigger = tmp_path / "trigger"
    (tmp_path / f"{exercise}.py").write_text(WAITS_FOR_THE_OTHER_PROGRAM.format(
        exercise=exercise, name=name, trigger=str(trigger), segment=str(SHM_DIR / segment)))
    other = subprocess.Popen([sys.executable, "-c", OTHER_PROGRAM, str(trigger), segment])
    try:
        result = run_check(tmp_path, exercise, check, timeout_s=90)
        other.wait(30)
        assert (SHM_DIR / segment).exists(), "the grader deleted a segment another program made during the grade"
        assert result.status == PASS, result.explain()
    finally:
        other.kill()
        (SHM_DIR / segment).unlink(missing_ok=True)


@needs_dev_shm
def test_a_segment_leaked_by_a_spawned_worker_is_caught(tmp_path: Path) -> None:
    """The ledger follows the graded code into worker processes started with spawn."""
    (tmp_path / "ex03_process_loader.py").write_text(textwrap.dedent("""
        import multiprocessing
        from multiprocessing import resource_tracker, shared_memory
        from solutions.ex03_process_loader import *
        from solutions.ex03_process_loader import ProcessLoader as Reference

        def make_and_forget() -> None:
            segment = shared_memory.SharedMemory(create=True, size=4096)
            resource_tracker.unregister(segment._name, "shared_memory")
            segment.close()

        class ProcessLoader(Reference):
            def __init__(self, *args, **kwargs):
                helper = multiprocessing.get_context("spawn").Process(target=make_and_forget)
                helper.start()
                helper.join(60)
                super().__init__(*args, **kwargs)
    """))
    result = run_check(tmp_path, "ex03_process_loader", "batches_match_sequential_reference", timeout_s=90)
    assert result.status == FAIL and "not unlinked" in result.message, result.explain()


def test_memory_growth_is_stopped_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ex02_threaded_prefetch.py").write_text(textwrap.dedent("""
        class ThreadedPrefetcher:
            def __init__(self, iterable, depth=2):
                hoard = []
                while True:
                    hoard.append(bytearray(64 * 2**20))
    """))
    monkeypatch.setenv(MEMORY_CAP_ENV, "1")
    start = time.monotonic()
    result = run_check(tmp_path, "ex02_threaded_prefetch", "prefetcher_yields_every_item_in_order", timeout_s=60)
    assert result.status == FAIL and "unbounded memory growth" in result.message, result.explain()
    assert time.monotonic() - start < 30, "the runaway should be stopped at the cap, long before the time limit"


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="proportional memory (PSS) is read on Linux")
def test_pages_that_forked_workers_share_count_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four forked workers reading the parent's 300 MB hold 1.5 GB of resident memory summed, 0.3 GB in truth: a
    1 GiB cap must not stop them (a worker per core on a 16-core machine is the course's own advice)."""
    (tmp_path / "ex02_threaded_prefetch.py").write_text(textwrap.dedent("""
        import multiprocessing, time
        import numpy as np

        BIG = np.ones(300 * 2**20, dtype=np.uint8)

        def read_all_pages():
            assert int(BIG[::4096].sum()) == len(BIG) // 4096
            time.sleep(3)

        class ThreadedPrefetcher:
            def __init__(self, iterable, depth=2):
                workers = [multiprocessing.get_context("fork").Process(target=read_all_pages) for _ in range(4)]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join(30)
                raise NotImplementedError("TODO(ex02): done sharing pages")
    """))
    monkeypatch.setenv(MEMORY_CAP_ENV, "1")
    result = run_check(tmp_path, "ex02_threaded_prefetch", "prefetcher_yields_every_item_in_order", timeout_s=60)
    assert "unbounded memory growth" not in result.message, result.explain()
    assert result.peak_memory_mib < 1024, f"the peak counted shared pages once per worker: {result.peak_memory_mib} MiB"


@pytest.mark.parametrize("fresh_interpreter", ["0", "1"], ids=["forked from a waiting process", "fresh interpreter"])
def test_a_crash_is_explained_for_the_exercise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               fresh_interpreter: str) -> None:
    monkeypatch.setenv(preload.FRESH_INTERPRETER_ENV, fresh_interpreter)
    (tmp_path / "ex03_process_loader.py").write_text(textwrap.dedent("""
        import os, signal
        from solutions.ex03_process_loader import *

        class ProcessLoader:
            def __init__(self, *args, **kwargs):
                os.kill(os.getpid(), signal.SIGSEGV)
    """))
    result = run_check(tmp_path, "ex03_process_loader", "batches_match_sequential_reference", timeout_s=60)
    assert result.status == ERROR, result.explain()
    assert "SIGSEGV" in result.message and "shared-memory segment" in result.message, result.message


# A learner's module that notes, when imported, what a fresh grading process would show.
NOTES_FACTS = textwrap.dedent("""
    import json, multiprocessing, os, sys
    import numpy as np
    with open(os.environ["FACTS_FILE"], "a") as facts:
        facts.write(json.dumps({
            "pid": os.getpid(), "parent": os.getppid(), "own_session": os.getsid(0) == os.getpid(), "random": float(np.random.random()),
            "main": sys.modules["__main__"].__spec__.name, "start_method": multiprocessing.get_start_method(),
            "cwd": os.getcwd(), "stdin_empty": sys.stdin.read() == "", "ledger": os.environ.get("LOADERLAB_SHM_LEDGER"),
        }) + "\\n")
""")


@pytest.mark.skipif(not preload.available(), reason="checks fork from a waiting process on Linux only")
def test_a_check_forked_from_a_waiting_process_starts_as_fresh_as_a_new_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts_file = tmp_path / "facts.jsonl"
    monkeypatch.setenv("FACTS_FILE", str(facts_file))
    (tmp_path / "ex02_threaded_prefetch.py").write_text(NOTES_FACTS)
    for start_method in ("spawn", None):
        result = run_check(tmp_path, "ex02_threaded_prefetch", "threaded_map_keeps_order", 60, start_method)
        assert result.status == FAIL and "MISSING" in result.message, result.explain()
    first, second = (json.loads(line) for line in facts_file.read_text().splitlines())
    assert first["pid"] != second["pid"] and first["own_session"] and second["own_session"]
    assert first["parent"] == second["parent"], "one waiting process serves every check of the exercise (pytest sets a new PYTEST_CURRENT_TEST for each)"
    assert first["random"] != second["random"], "numpy's global generator must be seeded anew, as in a new interpreter"
    assert first["main"] == second["main"] == "grader.child", "spawn-started workers import grader.child as main"
    assert first["start_method"] == "spawn" and second["start_method"] == multiprocessing.get_start_method()
    assert first["cwd"] == second["cwd"] == str(REPO_ROOT) and first["stdin_empty"]
    assert first["ledger"] and second["ledger"] and first["ledger"] != second["ledger"], "each check has its own ledger"


def test_pipe_traffic_counts_what_is_pickled_back() -> None:
    parent, child = multiprocessing.Pipe()
    sender = threading.Thread(target=child.send, args=(np.zeros(1_000_000, np.uint8),))  # a pipe holds less than 1 MB
    with pipe_traffic() as traffic:
        sender.start()
        parent.recv()
    sender.join()
    assert traffic.bytes >= 1_000_000


@pytest.mark.timing
def test_free_cores_stays_within_the_usable_cores() -> None:
    assert 1.0 <= free_cores(seconds=0.05) <= usable_cores()


# ---- results and the summary ------------------------------------------------------------------

def _result(exercise: str, check: str, status: str, **extra: object) -> CheckResult:
    return CheckResult(exercise, check, status, **extra)


def test_results_merge_check_by_check(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_json([_result("ex01_profile_and_fix", "bottleneck_is_named", FAIL)], "exercises", path, "fork")
    write_json([_result("ex02_threaded_prefetch", "threaded_map_keeps_order", PASS)], "exercises", path, "spawn")
    write_json([_result("ex01_profile_and_fix", "bottleneck_is_named", PASS)], "exercises", path, "fork")
    exercises = json.loads(path.read_text())["exercises"]
    assert set(exercises) == {"ex01_profile_and_fix", "ex02_threaded_prefetch"}, "grading one exercise keeps the others"
    assert [c["status"] for c in exercises["ex01_profile_and_fix"]["checks"]] == [PASS], "the newest grade of a check wins"
    assert exercises["ex01_profile_and_fix"]["status"] == PARTLY_RUN, "the exercise's other checks were never graded"
    assert exercises["ex02_threaded_prefetch"]["start_method"] == "spawn"
    assert {"when", "commit", "machine", "target"} <= set(exercises["ex02_threaded_prefetch"])
    assert exercises["ex02_threaded_prefetch"]["checks"][0]["when"], "each check says when it was graded"


def _every_check(exercise: str, status: str = PASS, **changed: str) -> list[CheckResult]:
    """A result for every check the exercise declares, with its step and timing, some statuses changed by name."""
    return [CheckResult(exercise, c.name, changed.get(c.name, status), step=c.step, step_title=c.step_title,
                        timed=c.timed) for c in find(exercise).checks]


def _progress_line(path: Path, exercise: str) -> str:
    return next(line for line in progress.report(read_results(path)) if line.startswith(f"  {exercise} "))


def test_a_run_of_some_checks_never_replaces_a_full_grade(tmp_path: Path) -> None:
    """Issue 33: a passed capstone read "in progress" after `pytest -k` graded one of its checks. A subset (-k, -m,
    watch's stop at the first failure) replaces the grades of the checks it ran, and only those."""
    path, capstone = tmp_path / "results.json", find("ex11")
    write_json(_every_check(capstone.name), "exercises", path, "fork")
    assert read_results(path)["exercises"][capstone.name]["status"] == DONE
    first = capstone.checks[0].name
    write_json([_result(capstone.name, first, PASS)], "exercises", path, "fork")  # pytest -k <first>
    assert read_results(path)["exercises"][capstone.name]["status"] == DONE
    assert _progress_line(path, capstone.name).split()[1] == DONE
    write_json([_result(capstone.name, first, NOT_STARTED)], "exercises", path, "fork")  # -k <first>, stub put back
    assert read_results(path)["exercises"][capstone.name]["status"] == IN_PROGRESS, "the newest grade of that check"


def test_a_skipped_check_keeps_a_grade_it_got_where_it_could_run(tmp_path: Path) -> None:
    path, ex09 = tmp_path / "results.json", find("ex09")
    write_json(_every_check(ex09.name), "exercises", path, "fork")  # graded on a GPU: done
    cpu = _every_check(ex09.name, **{c.name: SKIPPED for c in ex09.checks if c.cuda_only})
    write_json(cpu, "exercises", path, "fork")  # the same work graded again on a CPU
    assert read_results(path)["exercises"][ex09.name]["status"] == DONE
    fresh = tmp_path / "fresh.json"
    write_json(cpu, "exercises", fresh, "fork")  # graded on a CPU only
    assert read_results(fresh)["exercises"][ex09.name]["status"] == CORRECT_HERE


def test_grades_of_another_folder_never_reach_the_learners_file(tmp_path: Path) -> None:
    """Issue 33: grading a broken copy of exercise 09 with --target made `make progress` call it done. Only the
    learner's exercises/ are graded into .grader/results.json; another folder's grades are kept apart, or go to
    the file named with --results."""
    mine = REPO_ROOT / "exercises"
    assert results_file(mine) == LEARNER_RESULTS and results_file(mine, tmp_path / "r.json") == tmp_path / "r.json"
    assert results_file(REPO_ROOT / "solutions") == OTHER_TARGETS / "solutions.json"
    copy = tmp_path / "copy of ex09"
    copy.mkdir()
    assert results_file(copy).parent == OTHER_TARGETS and results_file(copy).name.endswith("copy-of-ex09.json")
    assert results_file(copy, LEARNER_RESULTS) == results_file(copy), "--results naming the learner's file is refused"
    assert results_file(copy, tmp_path / "elsewhere.json") == tmp_path / "elsewhere.json"


def test_a_hand_out_saves_only_the_learners_grades_as_theirs(tmp_path: Path) -> None:
    """In a learner's copy: grading exercises/ saves into .grader/results.json, grading a copied folder does not (it
    says where its grades went), and the saved grade of exercises/ is unchanged."""
    dest = tmp_path / "handout"
    write_copy(dest)
    env = os.environ | {"PYTHONPATH": str(dest)}
    check = "prefetcher_yields_every_item_in_order"

    def grade(*options: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pytest", "grader/test_ex02_threaded_prefetch.py", "-k", check,
                               "-p", "no:cacheprovider", *options], cwd=dest, capture_output=True, text=True, env=env,
                              timeout=180)
        return done.stdout + done.stderr

    assert "results saved to " + str(dest / ".grader" / "results.json") in grade()
    mine = (dest / ".grader" / "results.json").read_text()
    broken = dest / "broken-copy"
    broken.mkdir()
    (broken / "ex02_threaded_prefetch.py").write_text("class ThreadedPrefetcher:\n    pass\n")
    out = grade("--target", str(broken))
    kept_apart = dest / ".grader" / "targets" / f"{str(broken.relative_to(dest))}.json"
    assert f"results saved to {kept_apart} (the grades of broken-copy/, kept apart" in " ".join(out.split()), out
    assert (dest / ".grader" / "results.json").read_text() == mine, "the learner's grades were overwritten"
    assert read_results(kept_apart)["exercises"]["ex02_threaded_prefetch"]["checks"][0]["status"] == ERROR


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from grader.results import CheckResult, write_json
    path, number = Path(sys.argv[1]), int(sys.argv[2])
    for _ in range(20):
        write_json([CheckResult(f"ex{number:02d}_writer", "a_check", "pass")], "exercises", path, "fork")
""")


def test_results_stay_valid_when_runs_overlap(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n)], env=env) for n in range(1, 5)]
    assert all(w.wait(120) == 0 for w in writers)
    assert set(json.loads(path.read_text())["exercises"]) == {f"ex{n:02d}_writer" for n in range(1, 5)}


def test_summary_hints_at_the_failing_check_and_stays_quiet_about_untouched_exercises() -> None:
    results = [
        _result("ex01_profile_and_fix", "bottleneck_is_named", PASS),
        _result("ex01_profile_and_fix", "faster_than_naive", FAIL, timed=True),
        _result("ex02_threaded_prefetch", "threaded_map_keeps_order", NOT_STARTED),
        _result("ex03_process_loader", "batches_match_sequential_reference", NOT_STARTED),
    ]
    text = "\n".join(summary_lines(results, "exercises/", 2))
    assert "faster_than_naive" in text
    assert "ex02_threaded_prefetch" in text.split("Not started yet:")[1], "untouched exercises are listed, not hinted"
    assert text.count("hint:") == 1


def test_summary_for_a_fresh_clone_names_the_next_exercise_only() -> None:
    results = [_result(f"ex0{n}_x", "a_check", NOT_STARTED) for n in (1, 2)]
    results[0] = _result("ex01_profile_and_fix", "a_check", NOT_STARTED)
    text = "\n".join(summary_lines(results, "exercises/", 2))
    assert "Next: ex01_profile_and_fix" in text and "01_sequential_baseline" in text and "hint" not in text


def test_summary_says_correct_but_untimed_when_timed_checks_were_deselected() -> None:
    results = [_result("ex02_threaded_prefetch", "threaded_map_keeps_order", PASS)]
    text = "\n".join(summary_lines(results, "exercises/", 2, {"ex02_threaded_prefetch": {"io_reads_with_threads": True}}))
    assert CORRECT_UNTIMED in text and " pass " not in text


def test_one_status_vocabulary_for_a_group_of_checks() -> None:
    ran, skipped = _result("x", "a", PASS), _result("x", "b", SKIPPED, message="needs a CUDA GPU; it runs on one")
    assert status_of([ran]) == DONE and status_of([ran, skipped]) == CORRECT_HERE and status_of([skipped]) == SKIPPED
    assert status_of([ran], {"c": True}) == CORRECT_UNTIMED and status_of([ran], {"c": False}) == PARTLY_RUN
    assert status_of([], {"c": True}) == NOT_RUN and status_of([skipped], {"c": True}) == NOT_RUN
    assert status_of([skipped, _result("x", "c", FAIL)]) == FAIL


def test_the_readme_names_every_status_the_grader_writes() -> None:
    from grader.results import CHECK_STATUSES, GROUP_STATUSES, NOT_GRADED

    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## How grading works"):text.index("## The league table")]
    missing = [s for s in (*CHECK_STATUSES, *GROUP_STATUSES, NOT_GRADED) if f"`{s}`" not in " ".join(section.split())]
    assert not missing, f"README's 'How grading works' does not name {missing}"


CPU_REASON = ("needs a CUDA GPU and there is none here (torch 2.14.1, built with CUDA 13.0, sees no GPU); it runs on a "
              "machine with an NVIDIA GPU")


def _graded_on_a_cpu(exercise: str) -> list[CheckResult]:
    """Every check of the exercise passed, its CUDA-only ones skipped with the reason, as a CPU grade saves them."""
    cuda_only = {c.name for c in find(exercise).checks if c.cuda_only}
    results = _every_check(exercise, **{name: SKIPPED for name in cuda_only})
    for result in results:
        result.message = CPU_REASON if result.check in cuda_only else ""
    return results


def test_a_cpu_grade_says_what_it_did_not_grade_and_why() -> None:
    """Issue 33: on a CPU, exercise 09 read "passed what ran" with steps 4-5 left out and no reason, exercise 10
    "correct; timing not run". Every step shows; a skipped one with its reason; neither exercise is "done"."""
    ex09, ex10 = find("ex09"), find("ex10")
    text = "\n".join(summary_lines(_graded_on_a_cpu(ex09.name) + _graded_on_a_cpu(ex10.name), "exercises/", 2))
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("ex")}
    cuda_only = sum(c.cuda_only for c in ex09.checks)
    assert f"{CORRECT_HERE} ({cuda_only} of {len(ex09.checks)} checks not graded here)" in rows[ex09.name], text
    assert f"{CORRECT_HERE} (1 of {len(ex10.checks)} checks not graded here)" in rows[ex10.name], text
    assert CORRECT_UNTIMED not in text and f" {DONE}" not in rows[ex09.name] + rows[ex10.name]
    for number, title, checks in ex09.steps():
        assert f"step {number}: {title}" in text, f"step {number} of ex09 is missing from the table"
    assert text.count(f"not graded here: {CPU_REASON}") == 2, "the reason once per exercise, then 'as above'"
    assert "not graded here: as above" in text
    assert f"{ex09.name}: {cuda_only} checks (steps 4, 5) were not graded on this machine" in text


def test_a_step_whose_checks_were_all_deselected_still_shows() -> None:
    ex09 = find("ex09")
    results = [r for r in _every_check(ex09.name) if not r.timed]
    not_run = {ex09.name: {c.name: True for c in ex09.checks if c.timed}}
    text = "\n".join(summary_lines(results, "exercises/", 2, not_run))
    last = ex09.steps()[-1]
    assert re.search(rf"step {last[0]}: {re.escape(last[1])}\s+{NOT_RUN}", text), text
    assert CORRECT_UNTIMED in text


def test_the_skip_reason_reaches_the_saved_grade_through_pytest(tmp_path: Path) -> None:
    """The conftest's `cuda_only` skip is recorded with pytest's reason: in the table, in the results file."""
    from loaderlab.device import cuda_missing_reason

    reason = cuda_missing_reason()
    if reason is None:
        pytest.skip("this machine has a CUDA GPU: nothing is skipped")
    results = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "grader/test_ex09_device_prefetcher.py", "-k",
                           "copies_are_asynchronous or overlap_beats", "-p", "no:cacheprovider", "--target",
                           "solutions", "--results", str(results)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)
    assert "2 skipped" in done.stdout and f"not graded here: {reason}" in done.stdout, done.stdout[-3000:]
    saved = read_results(results)["exercises"]["ex09_device_prefetcher"]
    assert {c["status"] for c in saved["checks"]} == {SKIPPED} and all(c["message"] == reason for c in saved["checks"])
    assert saved["status"] == NOT_RUN, "two checks skipped, the others never run: nothing of it was graded"


def test_a_skip_raised_in_the_grading_process_reaches_its_result() -> None:
    """A CUDA-only check run outside pytest (no mark to skip it) reports itself skipped, with the reason."""
    from loaderlab.device import cuda_missing_reason

    reason = cuda_missing_reason()
    if reason is None:
        pytest.skip("this machine has a CUDA GPU: nothing is skipped")
    result = run_check(REPO_ROOT / "solutions", "ex10_gpu_decode", "device_decode_beats_cpu_workers", timeout_s=120)
    assert result.status == SKIPPED and result.message == reason and not result.output


def test_the_graders_own_lines_are_kept_apart_from_the_learners_output() -> None:
    """What a check prints (a comparison table, its settings) goes to the notes, what the learner's code prints to the
    output that a failure shows under "your code printed"."""
    import io

    output, notes = io.StringIO(), io.StringIO()
    stream = child.GraderLinesApart(output, notes)
    grader_code = compile("print('candidate 10.0/s', file=stream)", str(REPO_ROOT / "grader" / "checks" / "x.py"), "exec")
    learner_code = compile("print('my debug line', file=stream)", str(REPO_ROOT / "exercises" / "x.py"), "exec")
    exec(grader_code, {"stream": stream})
    exec(learner_code, {"stream": stream})
    assert notes.getvalue() == "candidate 10.0/s\n" and output.getvalue() == "my debug line\n"
    explained = CheckResult("x", "a", FAIL, "too slow", output=output.getvalue(), notes=notes.getvalue()).explain()
    printed = explained.split("--- your code printed (last lines) ---")[1]
    assert "my debug line" in printed and "candidate" not in printed and "candidate" in explained


def test_summary_says_when_the_machine_was_busy() -> None:
    metrics = {"name": "loader", "candidate_ips": 10.0, "baseline_ips": 10.0, "ratio": 1.0, "target": 0.8,
               "cores": 2, "free_cores": 1.2, "passed": True}
    text = "\n".join(summary_lines([_result("ex03_process_loader", "x", PASS, metrics=metrics, timed=True)], "s/", 2))
    assert "2 (1.2 free)" in text and "busy while timing" in text



def test_summary_shows_only_a_checks_first_hint_and_how_to_ask_for_the_next() -> None:
    exercise, check = "ex11_training_script", "labels_change_when_the_split_moves"
    levels = hints.check_hints(exercise)[check]
    assert len(levels) >= 2
    text = "\n".join(summary_lines([_result(exercise, check, FAIL, step=4, step_title="a split elsewhere")], "exercises/", 2))
    assert f"hint: {levels[0]}" in text
    assert not any(level in text for level in levels[1:]), "the levels that spell out the fix come on request only"
    assert f"next level: make hint EX=ex11 CHECK={check} LEVEL=2" in text


def test_a_check_without_hints_of_its_own_points_at_the_exercises_levels() -> None:
    exercise = "ex02_threaded_prefetch"
    text = "\n".join(summary_lines([_result(exercise, "a_check_with_no_hint", FAIL)], "exercises/", 2))
    assert f"hint: {hints.hint(exercise, 1)}" in text and "next level: make hint EX=ex02 LEVEL=2" in text



CLIMBING = sorted(hints.all_hints())


@pytest.mark.parametrize("exercise", CLIMBING)
def test_check_hints_climb_from_a_nudge(exercise: str) -> None:
    """The summary shows a failed check's first level only, so that level nudges and a later one gives the fix."""
    for check, levels in hints.check_hints(exercise).items():
        assert len(levels) >= 2, f"{exercise} {check}: a nudge toward the cause first, the fix on request"
        code = re.search(r"[A-Za-z_]\([^)]|torch\.|=\s*[\w.]+\(", levels[0])
        assert code is None, f"{exercise} {check}: the first level spells out code ({code and code.group()!r}): {levels[0]}"

def test_make_hint_climbs_a_checks_levels_and_the_exercises() -> None:
    def hint(*args: str) -> str:
        done = subprocess.run(["make", "-s", "hint", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    check = "batches_pinned_for_the_wrong_device"
    levels = hints.check_hints("ex11_training_script")[check]
    for level, text in enumerate(levels, start=1):
        out = hint("EX=ex11", f"CHECK={check}", f"LEVEL={level}")
        assert f"check {check}, hint {level} of {len(levels)}" in out and text in out
        assert (f"LEVEL={level + 1}" in out) == (level < len(levels)), "says how to ask for the next level, until the last"
    first = hint("EX=ex11", f"CHECK={check}")
    assert levels[0] in first and f"CHECK={check} LEVEL=2" in first
    assert hints.all_hints()["ex02_threaded_prefetch"][1] in hint("EX=ex02", "LEVEL=2")


def test_a_group_whose_open_checks_are_only_not_started_is_not_a_failure() -> None:
    started = [_result("ex13_resumable_loading", "a", PASS), _result("ex13_resumable_loading", "b", NOT_STARTED)]
    assert status_of(started) == IN_PROGRESS
    assert status_of(started[1:]) == NOT_STARTED
    assert status_of([_result("x", "a", NOT_STARTED), _result("x", "b", NOT_TIMED, timed=True)]) == NOT_STARTED
    assert status_of(started + [_result("ex13_resumable_loading", "c", FAIL)]) == FAIL
    text = "\n".join(summary_lines([_result("ex13_resumable_loading", "a", PASS, step=1, step_title="one process"),
                                    _result("ex13_resumable_loading", "b", NOT_STARTED, step=2,
                                            step_title="killed and resumed")], "exercises/", 2))
    assert " fail" not in text and "hint:" not in text and "check `b` (not started)" in text


def test_summary_keeps_whole_step_names_and_shows_units_and_measured_figures() -> None:
    comparison = {"name": "resume at 18 of 24 batches", "candidate_ips": 400.0, "baseline_ips": 100.0, "ratio": 4.0,
                  "target": 3.0, "cores": 2, "free_cores": None, "passed": True, "unit": "samples"}
    stall = Measured("data stall, 10 batches (a short run)", 0.04, 0.3, at_most=True).to_dict()
    accuracy = Measured("val accuracy, 12 epochs (ci's short run)", 0.2, 0.25, at_most=False,
                        note="time to 25%: not reached").to_dict()
    step = {"step": 8, "step_title": "the copy to the device"}
    results = [_result("ex11_training_script", "batches_pinned_for_the_wrong_device", PASS, **step),
               _result("ex13_resumable_loading", "resume_beats_fast_forward", PASS, metrics=comparison, timed=True),
               _result("ex11_training_script", "data_stall_under_bound", PASS, metrics=stall, timed=True),
               _result("ex11_training_script", "accuracy_after_the_epoch_budget", FAIL, metrics=accuracy, timed=True)]
    text = "\n".join(summary_lines(results, "exercises/", 2))
    assert "step 8: the copy to the device" in text
    assert "(samples/s)" in text
    assert "data stall, 10 batches (a short run)" in text and "4%  at most 30%" in text
    assert "val accuracy, 12 epochs (ci's short run)" in text and "too low" in text and "20% at least 25%" in text
    assert "time to 25%: not reached" in text


def test_a_measured_figure_passes_by_its_bound() -> None:
    assert Measured("stall", 0.3, 0.3, at_most=True).passed and not Measured("stall", 0.31, 0.3, at_most=True).passed
    assert Measured("acc", 0.25, 0.25, at_most=False).passed and not Measured("acc", 0.2, 0.25, at_most=False).passed


# ---- quizzes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("module", quiz.modules())
def test_quiz_is_well_formed_and_grades_its_own_answers(module: str) -> None:
    loaded = quiz.load(module)
    assert len(loaded.questions) >= 4, f"module {module}: a quiz needs at least four questions"
    for question in loaded.questions:
        assert 3 <= len(question.choices) <= 5 and question.why.strip()
    assert all(quiz.grade(loaded, [q.answer for q in loaded.questions]))
    assert not any(quiz.grade(loaded, [q.answer % len(q.choices) + 1 for q in loaded.questions]))


@pytest.mark.skipif(not preload.available(), reason="checks fork from a waiting process on Linux only")
def test_waiting_processes_beyond_the_limit_are_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(preload.KEEP_WAITING_ENV, "1")
    for exercise, check in (("ex02_threaded_prefetch", "threaded_map_keeps_order"),
                            ("ex01_profile_and_fix", "batches_match_reference"),
                            ("ex02_threaded_prefetch", "threaded_map_keeps_order")):
        result = run_check(REPO_ROOT / "exercises", exercise, check, 60)
        assert result.status == NOT_STARTED, result.explain()
        alive = [w for w in preload._waiting.values() if w.process.poll() is None]
        assert len(preload._waiting) == 1 and len(alive) == 1 and alive[0].exercise == exercise


def test_expected_crop_is_the_reference_and_follows_the_files_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks' cache of reference crops gives what reference_crop gives, from the disk the second time, and a file
    rewritten in place (same path, other bytes) gets its own crop, not the cached one."""
    import shutil

    from grader import support
    from loaderlab.images import list_samples, reference_crop
    from loaderlab.paths import dataset_dir

    monkeypatch.setattr(support, "REFERENCE_CACHE", tmp_path / "cache")
    first, second = (sample.path for sample in list_samples(dataset_dir("ci") / "train")[:2])
    path = tmp_path / "image.jpg"
    shutil.copyfile(first, path)
    assert np.array_equal(support.expected_crop(path), reference_crop(first))
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 1
    assert np.array_equal(support.expected_crop(path), reference_crop(first))  # read back
    shutil.copyfile(second, path)
    assert np.array_equal(support.expected_crop(path), reference_crop(second))
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="POSIX shared memory listed in /dev/shm (Linux)")
def test_a_checks_leftover_segments_are_unlinked_after_it_and_nothing_else(tmp_path: Path) -> None:
    """A loader abandoned mid-hang cannot unlink its slots: the runner unlinks what the check's ledger lists once its
    processes are gone (measured before: three planted ex03 folders left 8 segments in /dev/shm), and only that."""
    from multiprocessing import resource_tracker
    from multiprocessing.shared_memory import SharedMemory

    from grader import shm_ledger

    left, other = SharedMemory(create=True, size=64), SharedMemory(create=True, size=64)
    ledger = tmp_path / "ledger.txt"
    ledger.write_text(f"{left.name.lstrip('/')}\n")
    try:
        assert shm_ledger.unlink_leftovers(ledger) == [left.name.lstrip("/")]
        assert not (Path("/dev/shm") / left.name.lstrip("/")).exists()
        assert (Path("/dev/shm") / other.name.lstrip("/")).exists(), "a segment the ledger does not list was touched"
    finally:
        for segment in (left, other):
            segment.close()
        other.unlink()
        resource_tracker.unregister(left._name, "shared_memory")  # unlinked above, not by its owner
