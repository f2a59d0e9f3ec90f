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

from grader.hints import hint_for_check, next_steps
from loaderlab.machine import facts
from loaderlab.paths import REPO_ROOT

PASS, FAIL, ERROR, NOT_STARTED, TIMEOUT, NOT_TIMED = "pass", "fail", "error", "not started", "timeout", "not timed"
CORRECT_UNTIMED = "correct; timing not run"
PARTLY_RUN = "passed what ran"
BUSY_SHARE = 0.75  # fewer free cores than this share of the usable ones: the machine was busy while timing
RESULTS_FORMAT = 2


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


def _timed_rows(checks: list[CheckResult], indent: str) -> list[str]:
    rows = []
    for result in checks:
        if not result.metrics:
            continue
        m = result.metrics
        mark = "ok" if m.get("passed") else "too slow"
        name_width = 30 - len(indent)
        rows.append(f"{indent}{m['name'][:name_width]:<{name_width}} {mark:<24} {m['candidate_ips']:>10.1f}/s "
                    f"{m['baseline_ips']:>10.1f}/s {m['ratio']:>6.2f}x {m['target']:>6.2f}x {_cores_cell(m):>13}")
    return rows


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
    header = (f"{'exercise / step':<30} {'status':<24} {'throughput':>12} {'baseline':>12} {'ratio':>7} "
              f"{'target':>7} {'cores':>13}")
    lines = [f"Grades for {target} ({cores} usable cores)", header, "-" * len(header)]
    advice: list[str] = []
    untouched: list[str] = []
    for exercise, checks in _grouped(results, lambda r: r.exercise).items():
        status = status_of(checks, not_run.get(exercise))
        lines.append(f"{exercise:<30} {status:<24}")
        steps = _grouped(checks, lambda r: (r.step, r.step_title))
        if len(steps) > 1 or next(iter(steps))[0]:
            for (number, title), members in steps.items():
                missing = {c: t for c, t in not_run.get(exercise, {}).items() if c in {m.check for m in members}}
                lines.append(f"  {f'step {number}: {title}'[:28]:<28} {status_of(members, missing):<24}")
                lines += _timed_rows(members, "    ")
        else:
            lines += _timed_rows(checks, "  ")
        if status == NOT_STARTED and all(r.status == NOT_STARTED for r in checks):
            untouched.append(exercise)
        elif status not in (PASS, CORRECT_UNTIMED, PARTLY_RUN):
            failing = next(r for r in checks if not r.passed and r.status != NOT_TIMED)
            where = f"step {failing.step} ({failing.step_title}), " if failing.step else ""
            advice += [f"{exercise}: {where}check `{failing.check}` ({failing.status}).",
                       f"  hint: {hint_for_check(exercise, failing.check)}",
                       f"  more: make hint EX={exercise[:4]} LEVEL=2"]
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
