"""The outcome of one check, and the table and JSON made from many.

One status vocabulary serves every exercise and every place that shows a grade (the table at the end of a grading
run, `.grader/results.json`, `make progress`, `make watch`, the scoreboard, the playbook; the README lists it). A
check is pass, fail, error, timeout, not started, not timed or skipped (not graded on this machine, with the reason
and what would grade it). A step or an exercise is one of GROUP_STATUSES: "done" only when every one of its checks
was graded and passed.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from grader import catalog
from grader.hints import hint_for_check, next_hint_command, next_steps
from loaderlab.machine import facts
from loaderlab.paths import GRADER_DIR, REPO_ROOT, exclusive_lock

# A check's status.
PASS, FAIL, ERROR, NOT_STARTED, TIMEOUT, NOT_TIMED = "pass", "fail", "error", "not started", "timeout", "not timed"
SKIPPED = "skipped"  # not graded on this machine: its message says why and what would grade it (a CUDA GPU)
CHECK_STATUSES = (PASS, FAIL, ERROR, NOT_STARTED, TIMEOUT, NOT_TIMED, SKIPPED)
# A step's or an exercise's status, from its checks' (see status_of). FAIL, NOT_STARTED, NOT_TIMED and SKIPPED
# (every check of the group skipped here) are group statuses too.
DONE = "done"                                    # every check graded, every one passed
CORRECT_HERE = "correct here, GPU part not graded"  # every check that could run here passed; the others were skipped
CORRECT_UNTIMED = "correct; timing not run"      # correctness passed; the timed checks were deselected (-m, -k)
PARTLY_RUN = "passed what ran"                   # what ran passed; other checks were deselected (-m, -k)
IN_PROGRESS = "in progress"                      # some checks pass, the others are not started yet: nothing failed
NOT_RUN = "not run"                              # every check of the group was deselected in this run
NOT_GRADED = "not graded yet"                    # nothing saved for it (make progress, the scoreboard)
GROUP_STATUSES = (DONE, CORRECT_HERE, CORRECT_UNTIMED, PARTLY_RUN, IN_PROGRESS, NOT_TIMED, NOT_STARTED, FAIL,
                  SKIPPED, NOT_RUN)
STATUS_WIDTH = max(len(status) for status in GROUP_STATUSES + CHECK_STATUSES)
BUSY_SHARE = 0.75  # fewer free cores than this share of the usable ones: the machine was busy while timing
# 3: skipped checks are saved with their reason, a group whose checks all passed is "done", checks merge one by one.
RESULTS_FORMAT = 3
OLDER_FORMATS = (2,)  # read by recomputing each exercise's status from its saved checks (see `upgrade`)


@dataclass
class Measured:
    """A timed check's figure that is not a ratio against a baseline (a data-stall fraction, an accuracy), returned by
    the check so that the table shows it, pass or fail. `failure` is the message when it misses its limit."""

    name: str               # what was measured, and on what (a short run is labelled as such)
    value: float
    limit: float
    at_most: bool           # True: the value must not exceed the limit; False: it must reach it
    percent: bool = True    # value and limit are fractions shown as percentages
    note: str = ""          # a further figure, e.g. the time to reach the limit
    failure: str = ""

    @property
    def passed(self) -> bool:
        return self.value <= self.limit if self.at_most else self.value >= self.limit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed, "kind": "measured"}


@dataclass
class CheckResult:
    """One check of one exercise: its status, a coaching message, and timing figures if any."""

    exercise: str
    check: str
    status: str
    message: str = ""
    seconds: float = 0.0
    metrics: dict[str, Any] | None = None
    output: str = field(default="", repr=False)  # what the learner's code printed (the grader's own lines: notes)
    peak_memory_mib: int = 0
    step: int = 0          # the graded step of the exercise this check belongs to (0: the exercise has no steps)
    step_title: str = ""
    timed: bool = False    # a throughput check (it runs only after the correctness checks pass)
    notes: str = field(default="", repr=False)   # what the check itself printed: its settings, a comparison table
    when: str = ""         # when it was graded (UTC, ISO 8601), set as it is saved

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def explain(self) -> str:
        """The failure as a learner should read it: the message, the grader's notes, then the learner's output."""
        text = f"[{self.status}] {self.exercise}: {self.check}\n{self.message}".rstrip()
        if self.notes.strip():
            text += "\n--- the grader noted ---\n" + self.notes.rstrip()
        if self.output.strip():
            text += "\n--- your code printed (last lines) ---\n" + self.output.rstrip()
        return text


def status_of(results: list[CheckResult], not_run: dict[str, bool] | None = None) -> str:
    """One status for a group of checks (an exercise or a step), in the vocabulary of GROUP_STATUSES.

    `not_run` names the group's checks that have no result (deselected with -m or -k), each with whether it is a
    timed check: passing what ran is then not "done". A skipped check was not graded either: a group whose other
    checks all passed is CORRECT_HERE, one whose every check was skipped is SKIPPED, one with nothing graded NOT_RUN.
    """
    not_run = not_run or {}
    graded = [r for r in results if r.status != SKIPPED]
    if not graded:  # skipped, every one of them; or nothing graded, some skipped, the others not run
        return SKIPPED if results and not not_run else NOT_RUN
    if all(r.passed for r in graded):
        if not_run:
            return CORRECT_UNTIMED if all(not_run.values()) else PARTLY_RUN
        return CORRECT_HERE if len(graded) < len(results) else DONE
    if any(r.status == NOT_STARTED for r in graded) and not any(r.passed for r in graded):
        return NOT_STARTED
    if any(r.status == NOT_STARTED for r in graded) and all(r.status in (PASS, NOT_STARTED, NOT_TIMED)
                                                           for r in graded):
        return IN_PROGRESS  # nothing failed: the open checks wait at a TODO
    if all(r.passed or r.status == NOT_TIMED for r in graded):
        return NOT_TIMED
    return FAIL


def declared_checks(exercise: str) -> dict[str, catalog.Check]:
    """The checks the exercise's grader file declares, by name, in file order ({} for a name the course lacks)."""
    found = next((e for e in catalog.exercises() if e.name == exercise), None)
    return {check.name: check for check in found.checks} if found else {}


def exercise_status(exercise: str, checks: list[CheckResult]) -> str:
    """An exercise's status from the results of its checks: a declared check without one counts as not run."""
    declared = declared_checks(exercise)
    graded = {result.check for result in checks}
    return status_of(checks, {name: check.timed for name, check in declared.items() if name not in graded})


def short_reason(message: str) -> str:
    """A skip's reason up to its first semicolon (what is missing), for one-line views."""
    return message.split(";")[0].strip() or "no reason given"


def saved_results(entry: Any, exercise: str = "") -> list[CheckResult]:
    """The checks of one saved exercise entry as CheckResults, leaving out what is not a check's table."""
    checks = entry.get("checks") if isinstance(entry, dict) else None
    names = {f.name for f in fields(CheckResult)}
    found = []
    for saved in checks if isinstance(checks, list) else []:
        if not (isinstance(saved, dict) and isinstance(saved.get("check"), str)
                and isinstance(saved.get("status"), str)):
            continue
        try:
            found.append(CheckResult(**({"exercise": exercise} | {k: v for k, v in saved.items() if k in names})))
        except TypeError:
            continue
    return found


def _grouped(results: list[CheckResult], key: Any) -> dict[Any, list[CheckResult]]:
    grouped: dict[Any, list[CheckResult]] = {}
    for result in results:
        grouped.setdefault(key(result), []).append(result)
    return grouped


def _cores_cell(metrics: dict[str, Any]) -> str:
    free = metrics.get("free_cores")
    return f"{metrics['cores']}" if free is None else f"{metrics['cores']} ({free:.1f} free)"


def _figure(value: float, percent: bool) -> str:
    return f"{value:.0%}" if percent else f"{value:.3g}"


def measured_cells(metrics: dict[str, Any]) -> tuple[str, str, str]:
    """(value, bound, verdict) of a saved `Measured` figure, as the tables show them."""
    bound = f"{'at most' if metrics['at_most'] else 'at least'} {_figure(metrics['limit'], metrics['percent'])}"
    verdict = "ok" if metrics.get("passed") else ("too high" if metrics["at_most"] else "too low")
    return _figure(metrics["value"], metrics["percent"]), bound, verdict


def is_measured(metrics: Any) -> bool:
    """Whether saved metrics are a `Measured` figure (not a comparison against a baseline)."""
    return isinstance(metrics, dict) and metrics.get("kind") == "measured" and \
        all(isinstance(metrics.get(k), (int, float)) for k in ("value", "limit"))


def _timed_rows(checks: list[CheckResult], indent: str, width: int) -> list[str]:
    """A row per measured figure: a throughput against its baseline, or a figure against its limit."""
    rows = []
    for result in checks:
        m = result.metrics
        if not m:
            continue
        name = f"{indent}{m['name']}"
        if is_measured(m):
            value, bound, mark = measured_cells(m)
            note = f"  ({m['note']})" if m.get("note") else ""
            rows.append(f"{name:<{width}} {mark:<{STATUS_WIDTH}} {value:>12} {bound:>12}{note}")
            continue
        mark = "ok" if m.get("passed") else "too slow"
        unit = m.get("unit", "items")
        rows.append(f"{name:<{width}} {mark:<{STATUS_WIDTH}} {m['candidate_ips']:>10.1f}/s "
                    f"{m['baseline_ips']:>10.1f}/s {m['ratio']:>6.2f}x {m['target']:>6.2f}x {_cores_cell(m):>13}  "
                    f"({unit}/s)")
    return rows


def _first_column(results: list[CheckResult]) -> int:
    """Wide enough for every exercise, step and figure name (never cut), at least 30."""
    names = [r.exercise for r in results] + [f"  step {r.step}: {r.step_title}" for r in results if r.step]
    names += [f"  step {c.step}: {c.step_title}"  # a step with no result shows too
              for exercise in {r.exercise for r in results} for c in declared_checks(exercise).values()]
    names += [f"    {r.metrics['name']}" for r in results if r.metrics and r.metrics.get("name")]
    return max([30] + [len(name) for name in names])


def busy_while_timing(results: list[CheckResult]) -> tuple[float, int] | None:
    """(free cores, usable cores) of the busiest timed check, if the machine was busy then; else None."""
    measured = [(r.metrics["free_cores"], r.metrics["cores"]) for r in results
                if r.metrics and r.metrics.get("free_cores") is not None]
    if not measured:
        return None
    free, cores = min(measured)
    return (free, cores) if free < BUSY_SHARE * cores else None


def _step_groups(exercise: str, checks: list[CheckResult],
                 not_run: dict[str, bool]) -> list[tuple[int, str, list[CheckResult], dict[str, bool]]]:
    """(number, title, results, checks not run) per step of the exercise that has either, in step order."""
    declared = declared_checks(exercise)
    groups: dict[tuple[int, str], tuple[list[CheckResult], dict[str, bool]]] = {}
    for result in checks:
        groups.setdefault((result.step, result.step_title), ([], {}))[0].append(result)
    for name, timed in not_run.items():
        check = declared.get(name)
        if check is not None:
            groups.setdefault((check.step, check.step_title), ([], {}))[1][name] = timed
    return [(number, title, *groups[(number, title)]) for number, title in sorted(groups)]


def _skip_rows(skipped: list[CheckResult], shown: set[str], indent: str) -> list[str]:
    """A line per reason the skipped checks give (the first time it is given in the exercise: later, 'as above')."""
    rows = []
    for reason in dict.fromkeys(r.message.strip() or short_reason("") for r in skipped):
        rows.append(f"{indent}not graded here: {'as above' if reason in shown else reason}")
        shown.add(reason)
    return rows


def summary_lines(results: list[CheckResult], target: str, cores: int,
                  not_run: dict[str, dict[str, bool]] | None = None) -> list[str]:
    """The end-of-run table: a line per exercise, per step (every step, also one whose checks were all skipped or
    deselected) and per timed part; a skipped check's reason under its step; then what to do next.

    `not_run` maps an exercise to its checks that were not run ({check: is_timed}).
    """
    not_run = not_run or {}
    width = _first_column(results)
    header = (f"{'exercise / step':<{width}} {'status':<{STATUS_WIDTH}} {'throughput':>12} {'baseline':>12} "
              f"{'ratio':>7} {'target':>7} {'cores':>13}")
    lines = [f"Grades for {target} ({cores} usable cores)", header, "-" * len(header)]
    advice: list[str] = []
    untouched: list[str] = []
    for exercise, checks in _grouped(results, lambda r: r.exercise).items():
        status = status_of(checks, not_run.get(exercise))
        skipped = [r for r in checks if r.status == SKIPPED]
        count = f" ({len(skipped)} of {len(checks)} checks not graded here)" if status == CORRECT_HERE else ""
        lines.append(f"{exercise:<{width}} {status:<{STATUS_WIDTH}}{count}".rstrip())
        steps = _step_groups(exercise, checks, not_run.get(exercise, {}))
        shown: set[str] = set()
        if len(steps) > 1 or steps[0][0]:
            for number, title, members, missing in steps:
                lines.append(f"{f'  step {number}: {title}':<{width}} {status_of(members, missing)}".rstrip())
                lines += _skip_rows([m for m in members if m.status == SKIPPED], shown, "    ")
                lines += _timed_rows(members, "    ", width)
        else:
            lines += _skip_rows(skipped, shown, "  ") + _timed_rows(checks, "  ", width)
        if status == NOT_STARTED and all(r.status in (NOT_STARTED, SKIPPED) for r in checks):
            untouched.append(exercise)
            continue
        failing = next((r for r in checks if r.status not in (PASS, NOT_TIMED, SKIPPED)), None)
        if status in (DONE, CORRECT_UNTIMED, PARTLY_RUN) or failing is None:
            if skipped:
                numbers = sorted({r.step for r in skipped if r.step})
                where = f" (step{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))})" if numbers else ""
                many = len(skipped) > 1
                advice += [f"{exercise}: {len(skipped)} check{'s' if many else ''}{where} {'were' if many else 'was'} "
                           f"not graded on this machine (why: under each step above); grade it again where "
                           f"{'they' if many else 'it'} can run."]
            continue
        where = f"step {failing.step} ({failing.step_title}), " if failing.step else ""
        if failing.status == NOT_STARTED:  # nothing failed: where to go on, and nothing of the answer
            advice += [f"{exercise}: next, {where}check `{failing.check}` (not started): fill in the TODO its "
                       "message names."]
        else:  # the check's first hint only: the levels that spell out the fix come on request
            advice += [f"{exercise}: {where}check `{failing.check}` ({failing.status}).",
                       f"  hint: {hint_for_check(exercise, failing.check)}",
                       f"  next level: {next_hint_command(exercise, failing.check)}"]
    busy = busy_while_timing(results)
    if busy:
        advice += ["", f"The machine was busy while timing: {busy[0]:.1f} of {busy[1]} cores were free. Targets that "
                   "depend on cores were scaled to the free ones, so a ratio here says less than usual; close other "
                   "programs and grade again for figures that mean more."]
    if untouched and not advice:
        advice += next_steps(untouched[0])
    elif untouched:
        advice += ["", f"Not started yet: {', '.join(untouched)}."]
    return lines + ([""] + advice if advice else [])


COURSE_COMMIT_FILE = REPO_ROOT / "COURSE_COMMIT"  # a learner copy's record of the course commit it was made from


def course_commit() -> str | None:
    """The course's commit: a learner copy's COURSE_COMMIT, else this checkout's HEAD; None when neither says.

    Only this folder's own repository counts, never one that happens to enclose it.
    """
    try:
        return COURSE_COMMIT_FILE.read_text().strip() or None
    except OSError:
        pass
    try:
        done = subprocess.run(["git", "rev-parse", "--show-toplevel", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split() if done.returncode == 0 else []
    return lines[1] if len(lines) == 2 and Path(lines[0]).resolve() == REPO_ROOT.resolve() else None


def read_results(path: Path) -> dict[str, Any]:
    """A results file's content, in this format; {} when it is missing, unreadable or of no format read here."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return upgrade(payload) if isinstance(payload, dict) else {}


def upgrade(payload: dict[str, Any]) -> dict[str, Any]:
    """A results file of this format as it is; one of an older format read here with each exercise's status
    recomputed from its saved checks (an older grader saved no skipped check, so a check it skipped reads as not
    run); {} for any other."""
    if payload.get("format") == RESULTS_FORMAT:
        return payload
    if payload.get("format") not in OLDER_FORMATS:
        return {}
    exercises = payload.get("exercises")
    for name, entry in (exercises.items() if isinstance(exercises, dict) else ()):
        if isinstance(entry, dict):
            entry["status"] = exercise_status(name, saved_results(entry, name))
    return payload | {"format": RESULTS_FORMAT}


LEARNER_EXERCISES = REPO_ROOT / "exercises"   # the learner's own folder: its grades alone go to LEARNER_RESULTS
LEARNER_RESULTS = GRADER_DIR / "results.json"
OTHER_TARGETS = GRADER_DIR / "targets"       # each other folder's grades, kept apart: <folder's path>.json


def is_learners(target: Path) -> bool:
    """Whether `target` is the learner's own exercises/ folder."""
    return target.resolve() == LEARNER_EXERCISES.resolve()


def results_file(target: Path, requested: Path | None = None) -> Path:
    """Where the grades of `target` are saved. The learner's exercises/: `requested`, else .grader/results.json.
    Any other folder (solutions/, a planted or a copied folder) never goes to .grader/results.json: it goes to
    `requested` when that is another file, else to a file of its own under .grader/targets/."""
    if is_learners(target):
        return requested or LEARNER_RESULTS
    if requested is not None and requested.resolve() != LEARNER_RESULTS.resolve():
        return requested
    shown = target.resolve().relative_to(REPO_ROOT) if target.resolve().is_relative_to(REPO_ROOT) else target.resolve()
    return OTHER_TARGETS / (re.sub(r"[^A-Za-z0-9_.-]+", "-", str(shown)).strip("-") + ".json")


def merged_checks(saved: list[CheckResult], graded: list[CheckResult], exercise: str) -> list[CheckResult]:
    """An exercise's saved checks with this run's merged in, one check at a time: a check graded now replaces its
    saved result, except that a check skipped now keeps a grade it got where it could run; a check not run now
    keeps its saved result. Checks the grader no longer declares are dropped; the rest keep the grader's order."""
    merged = {result.check: result for result in saved}
    for result in graded:
        kept = merged.get(result.check)
        if not (result.status == SKIPPED and kept is not None and kept.status != SKIPPED):
            merged[result.check] = result
    declared = list(declared_checks(exercise))
    if not declared:
        return list(merged.values())
    return [merged[name] for name in declared if name in merged]


def write_json(results: list[CheckResult], target: str, path: Path, start_method: str) -> None:
    """Merge this run's results into `path`, check by check (see `merged_checks`), each exercise's status recomputed
    from all its checks: a run of some checks (-k, -m, watch's stop at the first failure) never replaces a grade
    of the others, and grading one exercise never erases another.

    Each exercise keeps when and how it was last graded (the course's commit, the start method, the machine), each
    check when it was graded, so that instructors can collect the file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    machine = facts()
    for result in results:
        result.when = result.when or now
    with exclusive_lock(path.with_name(path.name + ".lock")):
        payload = read_results(path) or {"format": RESULTS_FORMAT, "exercises": {}}
        saved = payload.get("exercises") if isinstance(payload.get("exercises"), dict) else {}
        for name, graded in _grouped(results, lambda r: r.exercise).items():
            checks = merged_checks(saved_results(saved.get(name), name), graded, name)
            saved[name] = {"status": exercise_status(name, checks), "target": target, "when": now,
                           "commit": course_commit(), "start_method": start_method, "machine": machine,
                           "checks": [asdict(c) for c in checks]}
        payload["exercises"] = dict(sorted(saved.items()))
        payload |= {"updated": now, "learner": os.environ.get("LOADERLAB_LEARNER") or payload.get("learner"),
                    "machine": machine}
        _replace(path, payload)


def _replace(path: Path, payload: dict[str, Any]) -> None:
    """Write `payload` to `path` atomically: a reader sees the old file or the new one, never half of one."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=path.name, suffix=".tmp", delete=False) as out:
        json.dump(payload, out, indent=2)
    os.replace(out.name, path)


def forget(path: Path, exercises: list[str]) -> list[str]:
    """Remove these exercises' saved results from `path` (make reset); returns those that were there."""
    with exclusive_lock(path.with_name(path.name + ".lock")):
        payload = read_results(path)
        saved = payload.get("exercises", {})
        gone = [name for name in exercises if name in saved]
        if gone:
            payload["exercises"] = {name: entry for name, entry in saved.items() if name not in gone}
            _replace(path, payload)
    return gone
