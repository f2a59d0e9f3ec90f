"""The outcome of one check, and the table and JSON made from many."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grader.hints import first_hint
from loaderlab.machine import facts

PASS, FAIL, ERROR, NOT_STARTED, TIMEOUT, NOT_TIMED = "pass", "fail", "error", "not started", "timeout", "not timed"


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

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def explain(self) -> str:
        """The failure as a learner should read it."""
        text = f"[{self.status}] {self.exercise}: {self.check}\n{self.message}".rstrip()
        if self.output.strip():
            text += "\n--- your code printed (last lines) ---\n" + self.output.rstrip()
        return text


def exercise_status(results: list[CheckResult]) -> str:
    """pass only if every check passed; 'not started' while nothing has passed and a TODO is untouched."""
    if all(r.passed for r in results):
        return PASS
    if any(r.status == NOT_STARTED for r in results) and not any(r.passed for r in results):
        return NOT_STARTED
    return FAIL


def _by_exercise(results: list[CheckResult]) -> dict[str, list[CheckResult]]:
    grouped: dict[str, list[CheckResult]] = {}
    for result in results:
        grouped.setdefault(result.exercise, []).append(result)
    return grouped


def summary_lines(results: list[CheckResult], target: str, cores: int) -> list[str]:
    """The end-of-run table: one line per exercise, one more per timed part, then hints."""
    header = f"{'exercise':<34} {'status':<12} {'throughput':>12} {'baseline':>12} {'ratio':>7} {'target':>7} {'cores':>5}"
    lines = [f"Grades for {target} ({cores} usable cores)", header, "-" * len(header)]
    hints = []
    for exercise, checks in _by_exercise(results).items():
        status = exercise_status(checks)
        timed = [r for r in checks if r.metrics]
        lines.append(f"{exercise:<34} {status:<12}" + ("" if timed else f" {'-':>12} {'-':>12} {'-':>7} {'-':>7} {cores:>5}"))
        for result in timed:
            m = result.metrics
            mark = "ok" if m.get("passed") else "too slow"
            lines.append(
                f"  {m['name'][:32]:<32} {mark:<12} {m['candidate_ips']:>10.1f}/s {m['baseline_ips']:>10.1f}/s "
                f"{m['ratio']:>6.2f}x {m['target']:>6.2f}x {m['cores']:>5}"
            )
        if status != PASS:
            failing = next(r for r in checks if not r.passed)
            hints.append(f"{exercise}: first failing check `{failing.check}` ({failing.status}).")
            hints.append(f"  hint 1: {first_hint(exercise)}")
            hints.append(f"  more:   make hint EX={exercise} LEVEL=2")
    if hints:
        lines += ["", *hints]
    return lines


def write_json(results: list[CheckResult], target: str, path: Path, start_method: str) -> None:
    """Results with the machine's facts, for instructors to collect."""
    path.parent.mkdir(parents=True, exist_ok=True)
    grouped = _by_exercise(results)
    payload = {
        "target": target,
        "start_method": start_method,
        "machine": facts(),
        "exercises": {name: {"status": exercise_status(checks), "checks": [asdict(c) for c in checks]}
                      for name, checks in grouped.items()},
    }
    path.write_text(json.dumps(payload, indent=2))
