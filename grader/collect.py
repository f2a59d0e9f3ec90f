"""python -m grader.collect FILES_OR_FOLDERS [--out DIR]: a room's scoreboard (make scoreboard DIR=...).

For instructors. Reads many learners' results files (`.grader/results.json`, renamed or in one folder
each; folders are searched for *.json), and writes `scoreboard.html` (one static page: no server, no
external assets) and `scoreboard.md` (the same content as text): a status grid, learners by exercises
(01-13), coloured by status, with a progress bar per learner and how many are done with each exercise; then
each learner's measured ratios with the machine's cores, the room's median per timed check, and outliers
flagged: a ratio under half or over twice the room's median usually means a busy (or much bigger)
laptop, not a better solution.

Every value in a results file is the learner's input to the instructor's browser: a file holding a
status, an exercise or check name, or a number of a kind the grader never writes is reported and
skipped, as is a file that is not a results file, one over MAX_FILE_BYTES, or one that fails to read
in any other way (JSON nested too deep, say): the collection never stops on one file. Everything shown
is escaped, attributes included; a learner's name loses Unicode format characters (the bidirectional
controls among them) and cannot become a link in the Markdown.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import statistics
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.results import (CHECK_STATUSES, CORRECT_HERE, CORRECT_UNTIMED, DONE, ERROR, FAIL, GROUP_STATUSES,
                            IN_PROGRESS, NOT_RUN, NOT_STARTED, NOT_TIMED, OLDER_FORMATS, PARTLY_RUN, RESULTS_FORMAT,
                            SKIPPED, TIMEOUT, exercise_status, saved_results)
from grader.catalog import exercise_names
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
    met: dict[tuple[str, str], bool] = field(default_factory=dict)        # (exercise, timed check) -> met its target


def saved_checks(entry: Any) -> list[dict[str, Any]]:
    """An exercise entry's checks, leaving out whatever is not a check's table."""
    checks = entry.get("checks") if isinstance(entry, dict) else None
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


# A results file is a few hundred KB at most (13 exercises, their checks, the last 2000 characters of output and of
# notes per failed check); a file past this is no results file, and reading one whole could hold up the room's page.
MAX_FILE_BYTES = 4 * 2**20
EXERCISE_NAME = re.compile(r"ex\d{2}[a-z0-9_]*")   # the grader's file names: ex02_threaded_prefetch
CHECK_NAME = re.compile(r"[a-z0-9_]{1,80}")      # its test functions' names, less test_
MAX_NAME = 40                                     # a learner's name is cut to this many characters


def _whole(value: Any, what: str) -> int:
    """A whole number as the grader writes one (JSON's true and false are not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} is {value!r:.40}, not a whole number")
    return value


def _finite(value: Any, what: str) -> float:
    """A number as the grader writes one: finite (Python's JSON reader accepts NaN and Infinity), not a boolean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} is {value!r:.40}, not a finite number")
    return float(value)


def _status(value: Any, where: str, statuses: tuple[str, ...]) -> str:
    """A status the grader writes there (an exercise's or a check's); ValueError saying so otherwise."""
    if not isinstance(value, str) or value not in statuses:
        raise ValueError(f"{where}: status {value!r:.40} is none of the grader's")
    return value


def _machine_cores(payload: dict[str, Any]) -> str:
    machine = payload.get("machine", {})
    if not isinstance(machine, dict):
        raise ValueError("'machine' is not a table")
    usable = machine.get("usable_cores")
    usable_text = "?" if usable is None else str(_whole(usable, "machine.usable_cores"))
    free = [_finite(c["metrics"]["free_cores"], f"{name}: free_cores") for name, e in payload["exercises"].items()
            for c in saved_checks(e) if isinstance(c.get("metrics"), dict)
            and c["metrics"].get("free_cores") is not None]
    if not free:
        return usable_text
    spread = f"{min(free):.1f}" if f"{min(free):.1f}" == f"{max(free):.1f}" else f"{min(free):.1f}-{max(free):.1f}"
    return f"{usable_text} ({spread} free)"


def read_learner(path: Path) -> Learner:
    """One results file; ValueError saying why when it is not one.

    Every value is a learner's own: the names of exercises and checks, the statuses and the numbers must be
    of the kinds the grader writes, or the whole file is refused (the scoreboard is read in an instructor's
    browser); the learner's name is free text, escaped wherever it is written.
    """
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path.stat().st_size / 2**20:.1f} MiB, larger than any results file "
                         f"(at most {MAX_FILE_BYTES // 2**20} MiB read)")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not text") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg}, line {error.lineno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deep for a results file") from None
    if not isinstance(payload, dict) or "exercises" not in payload:
        raise ValueError("not a loaderlab results file (no 'exercises')")
    older = payload.get("format") in OLDER_FORMATS
    if payload.get("format") != RESULTS_FORMAT and not older:
        raise ValueError(f"results format {payload.get('format')!r:.40}, this collector reads formats "
                         f"{', '.join(map(str, (*OLDER_FORMATS, RESULTS_FORMAT)))}")
    if not isinstance(payload["exercises"], dict):
        raise ValueError("'exercises' is not a table")
    name = payload.get("learner")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"the learner's name is {name!r:.40}, not text")
    for exercise, entry in payload["exercises"].items():
        if not EXERCISE_NAME.fullmatch(exercise):
            raise ValueError(f"exercise {exercise!r:.40} is not a name the grader writes")
        if not isinstance(entry, dict):
            raise ValueError(f"{exercise}: its entry is not a table")
        checks = entry.get("checks", [])
        if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
            raise ValueError(f"{exercise}: 'checks' is not a list of tables")
    learner = Learner(learner_name(name, path), path, _machine_cores(payload))
    for exercise, entry in payload["exercises"].items():
        for check in entry.get("checks", []):
            check_name = check.get("check")
            if not isinstance(check_name, str) or not CHECK_NAME.fullmatch(check_name):
                raise ValueError(f"{exercise}: check {check_name!r:.40} is not a name the grader writes")
            _status(check.get("status"), f"{exercise} {check_name}", CHECK_STATUSES)
            metrics = check.get("metrics")
            if metrics is None:
                continue
            if not isinstance(metrics, dict):
                raise ValueError(f"{exercise} {check_name}: 'metrics' is not a table")
            if metrics.get("ratio") is not None:
                learner.ratios[(exercise, check_name)] = _finite(metrics["ratio"], f"{exercise} {check_name}: ratio")
                met = metrics.get("passed")
                if met is not None and not isinstance(met, bool):
                    raise ValueError(f"{exercise} {check_name}: 'passed' is {met!r:.40}, not true or false")
                if met is not None:
                    learner.met[(exercise, check_name)] = met
        # An older format's exercise status ("pass" among them) followed older rules (a check skipped for want of a
        # GPU was not saved and did not count): checked, then recomputed from its checks, as `make progress` reads it.
        status = _status(entry.get("status"), exercise, GROUP_STATUSES + (CHECK_STATUSES if older else ()))
        learner.statuses[exercise] = exercise_status(exercise, saved_results(entry, exercise)) if older else status
    return learner


def learner_name(name: str | None, path: Path) -> str:
    """The name to show: the file's, else its file name's stem, on one line, without Unicode format characters
    (category Cf: the bidirectional controls that reorder what follows, zero-width joiners), cut to MAX_NAME."""
    def clean(text: str) -> str:
        return " ".join("".join(c for c in text if unicodedata.category(c) != "Cf").split())[:MAX_NAME]

    return clean(name or "") or clean(path.stem) or "(no name)"


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
        except Exception as error:  # whatever the file holds, one file never stops the room's page
            problems.append(f"{path}: skipped, {error}" if isinstance(error, (OSError, ValueError)) else
                            f"{path}: skipped, it could not be read ({type(error).__name__}: {str(error)[:80]})")
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

    def done(self, exercise: str) -> int:
        """How many learners are done with `exercise` (every check graded and passed)."""
        return sum(learner.statuses.get(exercise) == DONE for learner in self.learners)


def build(learners: list[Learner], problems: list[str]) -> Board:
    """The board: every exercise of the course (graded or not, so the grid keeps its shape) and any other in the
    files, every timed check someone has a ratio for, and the room's median of each."""
    exercises = sorted(set(exercise_names()) | {e for learner in learners for e in learner.statuses})
    timed = sorted({key for learner in learners for key in learner.ratios})
    medians = {key: statistics.median(l.ratios[key] for l in learners if key in l.ratios) for key in timed}
    return Board(exercises, timed, learners, medians, problems)


def _ratio_cell(board: Board, learner: Learner, key: tuple[str, str], flag: str) -> str:
    ratio = learner.ratios.get(key)
    if ratio is None:
        return "-"
    where = board.outlier(learner, key)
    return f"{ratio:.2f}x" + (f" {flag} {where}" if where else "")


# What GitHub-flavoured Markdown's autolink extension turns into a link without brackets: a scheme's "://", a "www."
# and an e-mail address's "@". A backslash before the dot or the slash, and "@" as a character reference, break each
# trigger and render as the same characters.
AUTOLINK_TRIGGERS = ((re.compile(r"(?<=:)/(?=/)"), "\\/"), (re.compile(r"(?i)(?<=www)\."), "\\."),
                     (re.compile("@"), "&#64;"))


def markdown_cell(text: str) -> str:
    """Text that cannot break a Markdown table nor become markup in it (a learner may call themselves anything):
    no raw HTML, links (bracketed or bare) or code spans, no column bars, no line breaks."""
    text = html.escape(text, quote=False)
    for mark in "\\`[]|":
        text = text.replace(mark, "\\" + mark)
    for trigger, broken in AUTOLINK_TRIGGERS:
        text = trigger.sub(broken, text)
    return " ".join(text.split())


def _short(exercise: str) -> str:
    """A column's label: ex02_threaded_prefetch -> 02."""
    return exercise[2:4]


def markdown(board: Board) -> str:
    """The scoreboard as Markdown."""
    lines = ["# loaderlab scoreboard", "", f"{len(board.learners)} learner(s).", "", "## Status per exercise", ""]
    lines += ["| learner | cores | done | " + " | ".join(_short(e) for e in board.exercises) + " |",
              "|---|---|---|" + "---|" * len(board.exercises)]
    for learner in board.learners:
        cells = [_symbol(learner.statuses.get(e)) or " " for e in board.exercises]
        lines.append(f"| {markdown_cell(learner.name)} | {learner.cores} | {_done(learner, board)} of "
                     f"{len(board.exercises)} | " + " | ".join(cells) + " |")
    lines.append("| **done** | | | " + " | ".join(f"{board.done(e)} of {len(board.learners)}"
                                                    for e in board.exercises) + " |")
    lines += ["", "Key: " + "; ".join(f"{symbol} {' or '.join(statuses)}" for symbol, statuses in _legend_entries())
              + "; blank: not graded.", "", "Exercises: " + ", ".join(f"{_short(e)} {e[5:]}" for e in board.exercises)
              + "."]
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
        lines += ["", "## Files skipped", ""] + [f"- {markdown_cell(p)}" for p in board.problems]
    return "\n".join(lines) + "\n"


_OUTLIER_NOTE = (f"**!** marks a ratio under 1/{OUTLIER_FACTOR:g} or over {OUTLIER_FACTOR:g} times the room's median "
                 f"(with at least {MIN_ROOM_FOR_OUTLIERS} ratios in the room): usually a busy laptop or one with many "
                 "more cores, not a better or worse solution. Look at the cores column before praising or worrying.")

# What each status looks like in the grid: (CSS class, symbol). Only these classes are ever written.
STATUS_LOOK = {DONE: ("pass", "\u2713"), CORRECT_HERE: ("correct", "\u25d1"), CORRECT_UNTIMED: ("correct", "\u25d0"),
               PARTLY_RUN: ("correct", "\u25d0"), IN_PROGRESS: ("idle", "\u2026"), NOT_TIMED: ("untimed", "\u25cb"),
               FAIL: ("fail", "\u2717"), ERROR: ("fail", "!"), TIMEOUT: ("fail", "\u221e"),
               NOT_STARTED: ("idle", "\u00b7"), SKIPPED: ("idle", "\u2013"), NOT_RUN: ("idle", "\u2013")}
NOT_GRADED_LOOK = ("none", "")

PAGE_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{background:#f3f3f3}
.pass{background:#dff3df}.fail,.error,.timeout{background:#f8dcdc}.outlier{background:#fff1c2;font-weight:bold}
tfoot td{font-weight:bold}"""

BOARD_STYLE = """table.grid td,table.grid th{padding:.2em .45em}table.grid td.s{text-align:center;width:1.6em;
font-size:1.05em}.s.pass{background:#4caf50;color:#fff}.s.correct{background:#a5d6a7}.s.untimed{background:#ffe082}
.s.fail{background:#e57373;color:#fff}.s.idle{background:#eee;color:#888}.s.none{background:#fff}
.bar{display:inline-block;vertical-align:middle;width:8rem;height:.8rem;background:#e3e3e3;
border-radius:.4rem;overflow:hidden;white-space:nowrap;font-size:0}.bar span{display:inline-block;height:100%}.bar .pass{background:#4caf50}
.bar .correct{background:#a5d6a7}td.progress{white-space:nowrap}td.progress small{margin-left:.5em}
th[scope=row]{max-width:14em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
th.v{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;white-space:nowrap;max-height:20em;
overflow:hidden;text-overflow:ellipsis;padding:.4em .2em}td.r{text-align:right;white-space:nowrap}
td.r.met{color:#1b5e20}td.r.below{color:#b71c1c}.legend span.s{display:inline-block;width:1.4em;text-align:center;
margin:0 .3em 0 1em;border:1px solid #ccc}.key{color:#555;font-size:.9em;max-width:60em}
@media print{body{margin:0}}"""


def _escape(value: object) -> str:
    """Any value as HTML text or a quoted attribute's value: every <, >, &, " and ' escaped."""
    return html.escape(str(value), quote=True)


def _element(tag: str, text: str = "", raw: str = "", **attributes: object) -> str:
    """<tag attribute="value">text</tag>, every attribute value and the text escaped; `raw` is markup built here."""
    attrs = "".join(f' {name.rstrip("_").replace("_", "-")}="{_escape(value)}"' for name, value in attributes.items() if value != "")
    return f"<{tag}{attrs}>{_escape(text)}{raw}</{tag}>"


def _done(learner: Learner, board: Board) -> int:
    return sum(learner.statuses.get(e) == DONE for e in board.exercises)


def _progress_bar(learner: Learner, board: Board) -> str:
    total = len(board.exercises) or 1
    done = _done(learner, board)
    correct = sum(learner.statuses.get(e) in (CORRECT_HERE, CORRECT_UNTIMED, PARTLY_RUN) for e in board.exercises)
    label = f"{done} of {len(board.exercises)} done" + (f", {correct} correct but not all graded" if correct else "")
    segments = "".join(f'<span class="{css}" style="width:{100 * count / total:.1f}%"></span>'
                       for css, count in (("pass", done), ("correct", correct)) if count)
    return (_element("span", raw=segments, class_="bar", role="img", aria_label=label, title=label)
            + _element("small", f"{done}/{len(board.exercises)}"))


def _status_grid(board: Board) -> str:
    head = "".join(_element("th", _short(e), title=e) for e in board.exercises)
    rows = []
    for learner in board.learners:
        cells = []
        for exercise in board.exercises:
            status = learner.statuses.get(exercise)
            css, symbol = STATUS_LOOK.get(status, NOT_GRADED_LOOK) if status else NOT_GRADED_LOOK
            cells.append(_element("td", symbol, class_=f"s {css}",
                                  title=f"{learner.name}, {exercise}: {status or 'not graded'}"))
        rows.append("<tr>" + _element("th", learner.name, scope="row") + _element("td", learner.cores)
                    + _element("td", raw=_progress_bar(learner, board), class_="progress") + "".join(cells) + "</tr>")
    room = len(board.learners)
    foot = "".join(_element("td", f"{board.done(e)}", title=f"{e}: {board.done(e)} of {room} done")
                   for e in board.exercises)
    return (f'<table class="grid"><thead><tr><th>learner</th><th>cores</th><th>progress</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody><tfoot><tr><td>done</td><td></td><td>of {room}</td>{foot}</tr></tfoot>"
            "</table>")


def _symbol(status: str | None) -> str:
    return STATUS_LOOK.get(status, NOT_GRADED_LOOK)[1] if status else NOT_GRADED_LOOK[1]


def _legend_entries() -> list[tuple[str, list[str]]]:
    """(symbol, statuses) per symbol of the grid, in STATUS_LOOK's order."""
    seen: dict[str, list[str]] = {}
    for status, (_, symbol) in STATUS_LOOK.items():
        seen.setdefault(symbol, []).append(status)
    return list(seen.items())


def _legend() -> str:
    css_of = {symbol: css for css, symbol in STATUS_LOOK.values()}
    parts = "".join(_element("span", symbol, class_=f"s {css_of[symbol]}") + _escape(" or ".join(statuses))
                    for symbol, statuses in _legend_entries())
    return f'<p class="legend">{parts}<span class="s none"></span>not graded</p>'


def _ratio_grid(board: Board) -> str:
    head = "".join(_element("th", f"{e[:4]} {check}", class_="v", title=f"{e}: {check}") for e, check in board.timed)
    rows = []
    for learner in board.learners:
        cells = []
        for key in board.timed:
            where = board.outlier(learner, key)
            met = learner.met.get(key)
            css = " ".join(["r", "" if met is None else "met" if met else "below", "outlier" if where else ""])
            cells.append(_element("td", _ratio_cell(board, learner, key, "!"), class_=" ".join(css.split()),
                                  title=f"{learner.name}, {key[0][:4]} {key[1]}"
                                        + ("" if met is None else ": target met" if met else ": below its target")))
        rows.append("<tr>" + _element("th", learner.name, scope="row") + _element("td", learner.cores)
                    + "".join(cells) + "</tr>")
    foot = "".join(_element("td", f"{board.medians[k]:.2f}x", class_="r") for k in board.timed)
    return (f'<table class="grid"><thead><tr><th>learner</th><th>cores</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody><tfoot><tr><td>room median</td><td></td>{foot}</tr></tfoot></table>")


def page(board: Board) -> str:
    """The scoreboard as one static HTML page: a status grid with a progress bar per learner, then the ratios.

    Every value from a learner's file goes through `_escape`, in text and in attributes alike; the only classes
    and styles written are this module's own."""
    room = len(board.learners)
    key = ", ".join(f"{_short(e)} {e[5:].replace('_', ' ')}" for e in board.exercises)
    parts = [f"<h1>loaderlab scoreboard</h1><p>{room} learner(s).</p><h2>Status per exercise</h2>", _legend(),
             _status_grid(board), _element("p", f"Exercises: {key}.", class_="key")]
    if board.timed:
        parts += ["<h2>Ratios (candidate / baseline, measured in the same run)</h2>", _ratio_grid(board),
                  _element("p", _OUTLIER_NOTE.replace("**!**", "!")
                           + " Green: the ratio met its target; red: below it.", class_="key")]
    if board.problems:
        parts += ["<h2>Files skipped</h2><ul>", *(_element("li", p) for p in board.problems), "</ul>"]
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>loaderlab scoreboard</title>'
            f"<style>{PAGE_STYLE}\n{BOARD_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


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
