"""The outcome of one check, and the table and JSON made from many."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grader.hints import hint_for_check, next_hint_command, next_steps
from loaderlab.machine import facts
from loaderlab.paths import REPO_ROOT

PASS, FAIL, ERROR, NOT_STARTED, TIMEOUT, NOT_TIMED = "pass", "fail", "error", "not started", "timeout", "not timed"
IN_PROGRESS = "in progress"  # some checks pass, the others are not started yet: nothing failed
CORRECT_UNTIMED = "correct; timing not run"
PARTLY_RUN = "passed what ran"
BUSY_SHARE = 0.75  # fewer free cores than this share of the usable ones: the machine was busy while timing
RESULTS_FORMAT = 2


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
    output: str = field(default="", repr=False)
    peak_memory_mib: int = 0
    step: int = 0          # the graded step of the exercise this check belongs to (0: the exercise has no steps)
    step_title: str = ""
    timed: bool = False    # a throughput check (it runs only after the correctness checks pass)

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def explain(self) -> str:
        """The failure as a learner should read it."""
        text = f"[{self.status}] {self.exercise}: {self.check}\n{self.message}".rstrip()
        if self.output.strip():
            text += "\n--- your code printed (last lines) ---\n" + self.output.rstrip()
        return text


def status_of(results: list[CheckResult], not_run: dict[str, bool] | None = None) -> str:
    """One status for a group of checks (an exercise or a step).

    `not_run` names the group's checks that were not run in this session (deselected with -m or -k),
    each with whether it is a timed check: passing what ran is then not a pass.
    """
    not_run = not_run or {}
    if results and all(r.passed for r in results):
        if not not_run:
            return PASS
        return CORRECT_UNTIMED if all(not_run.values()) else PARTLY_RUN
    if any(r.status == NOT_STARTED for r in results) and not any(r.passed for r in results):
        return NOT_STARTED
    if any(r.status == NOT_STARTED for r in results) and all(r.status in (PASS, NOT_STARTED, NOT_TIMED)
                                                            for r in results):
        return IN_PROGRESS  # nothing failed: the open checks wait at a TODO
    if results and all(r.passed or r.status == NOT_TIMED for r in results):
        return NOT_TIMED
    return FAIL


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
            rows.append(f"{name:<{width}} {mark:<24} {value:>12} {bound:>12}{note}")
            continue
        mark = "ok" if m.get("passed") else "too slow"
        unit = m.get("unit", "items")
        rows.append(f"{name:<{width}} {mark:<24} {m['candidate_ips']:>10.1f}/s {m['baseline_ips']:>10.1f}/s "
                    f"{m['ratio']:>6.2f}x {m['target']:>6.2f}x {_cores_cell(m):>13}  ({unit}/s)")
    return rows


def _first_column(results: list[CheckResult]) -> int:
    """Wide enough for every exercise, step and figure name (never cut), at least 30."""
    names = [r.exercise for r in results] + [f"  step {r.step}: {r.step_title}" for r in results if r.step]
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


def summary_lines(results: list[CheckResult], target: str, cores: int,
                  not_run: dict[str, dict[str, bool]] | None = None) -> list[str]:
    """The end-of-run table: a line per exercise, per step and per timed part; then what to do next.

    `not_run` maps an exercise to its checks that were not run ({check: is_timed}).
    """
    not_run = not_run or {}
    width = _first_column(results)
    header = (f"{'exercise / step':<{width}} {'status':<24} {'throughput':>12} {'baseline':>12} {'ratio':>7} "
              f"{'target':>7} {'cores':>13}")
    lines = [f"Grades for {target} ({cores} usable cores)", header, "-" * len(header)]
    advice: list[str] = []
    untouched: list[str] = []
    for exercise, checks in _grouped(results, lambda r: r.exercise).items():
        status = status_of(checks, not_run.get(exercise))
        lines.append(f"{exercise:<{width}} {status:<24}".rstrip())
        steps = _grouped(checks, lambda r: (r.step, r.step_title))
        if len(steps) > 1 or next(iter(steps))[0]:
            for (number, title), members in steps.items():
                missing = {c: t for c, t in not_run.get(exercise, {}).items() if c in {m.check for m in members}}
                lines.append(f"{f'  step {number}: {title}':<{width}} {status_of(members, missing):<24}".rstrip())
                lines += _timed_rows(members, "    ", width)
        else:
            lines += _timed_rows(checks, "  ", width)
        if status == NOT_STARTED and all(r.status == NOT_STARTED for r in checks):
            untouched.append(exercise)
        elif status not in (PASS, CORRECT_UNTIMED, PARTLY_RUN):
            failing = next(r for r in checks if not r.passed and r.status != NOT_TIMED)
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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside `path` (where the OS offers one), so that two runs merge in turn."""
    try:
        import fcntl
    except ImportError:  # Windows: runs rarely overlap there; the atomic replace still keeps the file whole
        yield
        return
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_results(path: Path) -> dict[str, Any]:
    """A results file's content; {} when it is missing, unreadable or not of this format."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return payload if isinstance(payload, dict) and payload.get("format") == RESULTS_FORMAT else {}


def write_json(results: list[CheckResult], target: str, path: Path, start_method: str,
               not_run: dict[str, dict[str, bool]] | None = None) -> None:
    """Merge this run's results into `path`, exercise by exercise (the newest grade of each wins).

    Each exercise keeps when and how it was graded (the course's commit, the start method, the
    machine), so grading one exercise never erases the others, and instructors can collect the file.
    """
    not_run = not_run or {}
    path.parent.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    machine = facts()
    graded = {name: {"status": status_of(checks, not_run.get(name)), "target": target, "when": now,
                     "commit": course_commit(), "start_method": start_method, "machine": machine,
                     "checks": [asdict(c) for c in checks]}
              for name, checks in _grouped(results, lambda r: r.exercise).items()}
    with _locked(path):
        payload = read_results(path) or {"format": RESULTS_FORMAT, "exercises": {}}
        payload["exercises"] = dict(sorted((payload.get("exercises", {}) | graded).items()))
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
    with _locked(path):
        payload = read_results(path)
        saved = payload.get("exercises", {})
        gone = [name for name in exercises if name in saved]
        if gone:
            payload["exercises"] = {name: entry for name, entry in saved.items() if name not in gone}
            _replace(path, payload)
    return gone
