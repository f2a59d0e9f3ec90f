"""python -m grader.collect FILES_OR_FOLDERS [--out DIR]: a room's scoreboard (make scoreboard DIR=...).

For instructors. Reads many learners' results files (`.grader/results.json`, renamed or in one folder
each; folders are searched for *.json), and writes `scoreboard.html` (one static page: no server, no
external assets) and `scoreboard.md` (the same tables) with, per learner, each exercise's status and
measured ratios, the machine's cores; per exercise, the room's median ratio; and outliers flagged: a
ratio under half or over twice the room's median usually means a busy (or much bigger) laptop, not a
better solution. Files that are not results files are reported and skipped.
"""

from __future__ import annotations

import argparse
import html
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.results import PASS, RESULTS_FORMAT
from loaderlab.paths import GRADER_DIR

OUTLIER_FACTOR = 2.0   # a ratio under median / 2 or over median * 2 is flagged
MIN_ROOM_FOR_OUTLIERS = 3


@dataclass
class Learner:
    """One learner's results file, as the scoreboard needs it."""

    name: str
    source: Path
    cores: str
    statuses: dict[str, str] = field(default_factory=dict)                # exercise -> status
    ratios: dict[tuple[str, str], float] = field(default_factory=dict)    # (exercise, timed check) -> ratio


def saved_checks(entry: Any) -> list[dict[str, Any]]:
    """An exercise entry's checks, leaving out whatever is not a check's table."""
    checks = entry.get("checks") if isinstance(entry, dict) else None
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def _machine_cores(payload: dict[str, Any]) -> str:
    machine = payload.get("machine") if isinstance(payload.get("machine"), dict) else {}
    usable = machine.get("usable_cores", "?")
    free = [c["metrics"]["free_cores"] for e in payload["exercises"].values() for c in saved_checks(e) if isinstance(c, dict) and isinstance(c.get("metrics"), dict)
            and isinstance(c["metrics"].get("free_cores"), (int, float))]
    if not free:
        return f"{usable}"
    spread = f"{min(free):.1f}" if f"{min(free):.1f}" == f"{max(free):.1f}" else f"{min(free):.1f}-{max(free):.1f}"
    return f"{usable} ({spread} free)"


def read_learner(path: Path) -> Learner:
    """One results file; ValueError saying why when it is not one."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not text") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg}, line {error.lineno})") from None
    if not isinstance(payload, dict) or "exercises" not in payload:
        raise ValueError("not a loaderlab results file (no 'exercises')")
    if payload.get("format") != RESULTS_FORMAT:
        raise ValueError(f"results format {payload.get('format')!r}, this collector reads format {RESULTS_FORMAT}")
    if not isinstance(payload["exercises"], dict):
        raise ValueError("'exercises' is not a table")
    learner = Learner(str(payload.get("learner") or path.stem), path, _machine_cores(payload))
    for exercise, entry in payload["exercises"].items():
        if not isinstance(entry, dict):
            continue
        learner.statuses[exercise] = str(entry.get("status", "?"))
        for check in saved_checks(entry):
            metrics = check.get("metrics")
            if isinstance(metrics, dict) and isinstance(metrics.get("ratio"), (int, float)):
                learner.ratios[(exercise, str(check.get("check")))] = float(metrics["ratio"])
    return learner


def gather(paths: list[Path]) -> tuple[list[Learner], list[str]]:
    """Every readable learner under `paths`, and a line per file skipped (with why)."""
    files: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.json") if p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            problems.append(f"{path}: no such file or folder")
    learners: list[Learner] = []
    for path in files:
        try:
            learner = read_learner(path)
        except (OSError, ValueError, TypeError, AttributeError) as error:  # whatever the file holds, never crash
            problems.append(f"{path}: skipped, {error}")
            continue
        if any(other.name == learner.name for other in learners):
            learner.name = f"{learner.name} ({path.name})"
        learners.append(learner)
    return learners, problems


@dataclass
class Board:
    """The scoreboard's content, for both renderings."""

    exercises: list[str]
    timed: list[tuple[str, str]]              # (exercise, timed check) columns
    learners: list[Learner]
    medians: dict[tuple[str, str], float]
    problems: list[str]

    def outlier(self, learner: Learner, key: tuple[str, str]) -> str:
        """'low' or 'high' when this ratio is far from the room's median; '' otherwise."""
        ratio, median = learner.ratios.get(key), self.medians.get(key)
        room = sum(key in other.ratios for other in self.learners)
        if ratio is None or not median or room < MIN_ROOM_FOR_OUTLIERS:
            return ""
        return "low" if ratio < median / OUTLIER_FACTOR else "high" if ratio > median * OUTLIER_FACTOR else ""

    def passed(self, exercise: str) -> int:
        return sum(learner.statuses.get(exercise) == PASS for learner in self.learners)


def build(learners: list[Learner], problems: list[str]) -> Board:
    exercises = sorted({e for learner in learners for e in learner.statuses})
    timed = sorted({key for learner in learners for key in learner.ratios})
    medians = {key: statistics.median(l.ratios[key] for l in learners if key in l.ratios) for key in timed}
    return Board(exercises, timed, learners, medians, problems)


def _ratio_cell(board: Board, learner: Learner, key: tuple[str, str], flag: str) -> str:
    ratio = learner.ratios.get(key)
    if ratio is None:
        return "-"
    where = board.outlier(learner, key)
    return f"{ratio:.2f}x" + (f" {flag} {where}" if where else "")


def markdown_cell(text: str) -> str:
    """Text that cannot break a Markdown table (a learner may call themselves anything)."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(board: Board) -> str:
    """The scoreboard as Markdown."""
    lines = ["# loaderlab scoreboard", "", f"{len(board.learners)} learner(s).", "", "## Status per exercise", ""]
    lines += ["| learner | cores | " + " | ".join(e[:4] for e in board.exercises) + " |",
              "|---|---|" + "---|" * len(board.exercises)]
    for learner in board.learners:
        cells = [markdown_cell(learner.statuses.get(e, "-")) for e in board.exercises]
        lines.append(f"| {markdown_cell(learner.name)} | {learner.cores} | " + " | ".join(cells) + " |")
    lines.append("| **passed** | | " + " | ".join(f"{board.passed(e)} of {len(board.learners)}"
                                                  for e in board.exercises) + " |")
    if board.timed:
        lines += ["", "## Ratios (candidate / baseline, measured in the same run)", "",
                  "| learner | cores | " + " | ".join(f"{e[:4]} {c}" for e, c in board.timed) + " |",
                  "|---|---|" + "---|" * len(board.timed)]
        for learner in board.learners:
            cells = [_ratio_cell(board, learner, key, "**!**") for key in board.timed]
            lines.append(f"| {markdown_cell(learner.name)} | {learner.cores} | " + " | ".join(cells) + " |")
        lines.append("| **room median** | | " + " | ".join(f"{board.medians[k]:.2f}x" for k in board.timed) + " |")
        lines += ["", _OUTLIER_NOTE]
    if board.problems:
        lines += ["", "## Files skipped", ""] + [f"- {p}" for p in board.problems]
    return "\n".join(lines) + "\n"


_OUTLIER_NOTE = (f"**!** marks a ratio under 1/{OUTLIER_FACTOR:g} or over {OUTLIER_FACTOR:g} times the room's median "
                 f"(with at least {MIN_ROOM_FOR_OUTLIERS} ratios in the room): usually a busy laptop or one with many "
                 "more cores, not a better or worse solution. Look at the cores column before praising or worrying.")

PAGE_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{background:#f3f3f3}
.pass{background:#dff3df}.fail,.error,.timeout{background:#f8dcdc}.outlier{background:#fff1c2;font-weight:bold}
tfoot td{font-weight:bold}"""


def _html_table(header: list[str], rows: list[list[tuple[str, str]]], footer: list[str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="{css}">{html.escape(text)}</td>' for text, css in row) + "</tr>"
                   for row in rows)
    foot = "".join(f"<td>{html.escape(f)}</td>" for f in footer)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody><tfoot><tr>{foot}</tr></tfoot></table>"


def page(board: Board) -> str:
    """The scoreboard as one static HTML page."""
    status_rows = [[(l.name, ""), (l.cores, "")] + [(l.statuses.get(e, "-"), l.statuses.get(e, "").split(";")[0]
                                                     .replace(" ", "-")) for e in board.exercises]
                   for l in board.learners]
    parts = [f"<h1>loaderlab scoreboard</h1><p>{len(board.learners)} learner(s).</p><h2>Status per exercise</h2>",
             _html_table(["learner", "cores", *board.exercises], status_rows,
                         ["passed", "", *(f"{board.passed(e)} of {len(board.learners)}" for e in board.exercises)])]
    if board.timed:
        ratio_rows = [[(l.name, ""), (l.cores, "")] + [(_ratio_cell(board, l, k, "!"),
                                                         "outlier" if board.outlier(l, k) else "")
                                                        for k in board.timed] for l in board.learners]
        parts += ["<h2>Ratios (candidate / baseline, measured in the same run)</h2>",
                  _html_table(["learner", "cores", *(f"{e[:4]} {c}" for e, c in board.timed)], ratio_rows,
                              ["room median", "", *(f"{board.medians[k]:.2f}x" for k in board.timed)]),
                  f"<p>{html.escape(_OUTLIER_NOTE.replace('**!**', '!'))}</p>"]
    if board.problems:
        parts += ["<h2>Files skipped</h2><ul>", *(f"<li>{html.escape(p)}</li>" for p in board.problems), "</ul>"]
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>loaderlab scoreboard</title>'
            f"<style>{PAGE_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.collect", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="results files, or folders searched for *.json")
    parser.add_argument("--out", type=Path, default=GRADER_DIR / "scoreboard",
                        help="folder for scoreboard.html and scoreboard.md (default: .grader/scoreboard)")
    args = parser.parse_args(argv)
    learners, problems = gather(args.paths)
    for problem in problems:
        print(problem)
    board = build(learners, problems)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scoreboard.md").write_text(markdown(board), encoding="utf-8")
    (args.out / "scoreboard.html").write_text(page(board), encoding="utf-8")
    print(f"{len(learners)} learner(s), {len(problems)} file(s) skipped; wrote {args.out / 'scoreboard.html'} "
          f"and {args.out / 'scoreboard.md'}")


if __name__ == "__main__":
    main()
