"""python -m grader.playbook [--results PATH] [--capstone PATH] [--league PATH] [--out DIR]: the page you keep.

`make playbook` writes `.grader/playbook.md` and `.grader/playbook.html`, one page that prints, led by what you
earned on this machine: the configurations you chose (the worker count exercise 05 picked, your loaders, the start
method, the capstone's settings), your timed checks' ratios against their targets, the league table with your
loaders highlighted (`.grader/league.json`, from `make league`), the capstone's accuracy against wall time and its
data stall (`.grader/capstone.json`, from `make capstone`), then this machine's facts. What is not graded or not run
yet is one closing line naming the commands that measure it. Nothing is run or timed here, and nothing is invented.
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.catalog import Check, Exercise, exercises
from grader.collect import PAGE_STYLE, markdown_cell, saved_checks
from grader.hints import hint_for_check, next_hint_command
from grader.progress import group_status, saved_checks_of
from grader.results import (DONE, PASS, SKIPPED, busy_while_timing, course_commit, is_measured, measured_cells,
                            read_results, saved_results, short_reason)
from loaderlab.tools.doctor import TENSORFLOW, Report, diagnose
from loaderlab.machine import facts
from loaderlab.paths import GRADER_DIR, REPO_ROOT, active_profile

# What each timed check's figure says to do, filled in with its saved figures (see `_figures`). A timed check
# missing here gets the plain sentence of `GENERIC_LESSON`.
LESSONS: dict[tuple[str, str], str] = {
    ("ex01_profile_and_fix", "faster_than_naive"):
        "Cheap wins come before parallelism: your sequential loader ran {ratio} as fast as the naive loop. Keep "
        "images uint8, crop and resize in one call, use JPEG draft mode, then add workers.",
    ("ex02_threaded_prefetch", "io_reads_with_threads"):
        "Reads that wait on storage scale with threads past the core count: 8 threads read {ratio} as fast as one "
        "under 10 ms of emulated latency. Use a thread pool for slow or remote storage.",
    ("ex02_threaded_prefetch", "prefetch_overlaps_compute"):
        "Overlap loading with the step: your bounded prefetcher made the emulated training loop {ratio} as fast. "
        "Keep one in every training loop.",
    ("ex03_process_loader", "processes_beat_the_gil"):
        "A transform that holds the GIL needs processes, not threads: {name} ran {ratio} as fast as one process, "
        "on {cores}.",
    ("ex03_process_loader", "beats_a_naive_float32_pool"):
        "Send uint8 through shared memory, not float32 through pickles: {name} ran {ratio} as fast as {baseline_name}, "
        "on {cores}.",
    ("ex04_fast_dataloader", "twice_the_tutorial_configuration"):
        "Your DataLoader ({name}) ran {ratio} as fast as the tutorial's on {cores}: start new projects from "
        "exercises/ex04_fast_dataloader.py, not from the tutorial.",
    ("ex05_choose_workers", "real_sweep_choice_is_near_the_best"):
        "Use num_workers={chosen} on this machine: your chooser picked it, and re-measured it ran {ratio} as fast as "
        "the grader's best count ({best}). Sweep again on any other machine.",
    ("ex06_balanced_sampler", "balanced_loader_keeps_up"):
        "Balancing classes in the sampler ran {ratio} as fast as {baseline_name}: balance an imbalanced set there, "
        "while loading.",
    ("ex07_tfdata_pipeline", "first_epoch_beats_naive"):
        "tf.data overlaps only what you ask it to: the first epoch (empty cache) ran {ratio} as fast as the naive "
        "pipeline on one thread. Order: read and decode, cache, shuffle, augment, batch, prefetch.",
    ("ex07_tfdata_pipeline", "cached_epoch_is_fast"):
        "A cached epoch replays decoded data: {ratio} as fast as the naive pipeline. Cache before random "
        "augmentation, where the decoded set fits.",
    ("ex08_shards", "shards_beat_one_request_per_file"):
        "When every request costs latency (5 ms here, emulated), 4 MB shards read {ratio} as fast as one request "
        "per file: pack small files into shards on network or object storage.",
    ("ex09_device_prefetcher", "overlap_beats_copy_then_compute"):
        "Overlapping the next host-to-device copy with the step ran {ratio} as fast as copy-then-compute on this "
        "GPU: keep the device prefetcher (pinned memory, non_blocking copies).",
    ("ex10_gpu_decode", "device_decode_beats_cpu_workers"):
        "Decoding on the GPU ran {ratio} as fast as decoding in CPU workers: where CPU cores are few, decode on the "
        "device.",
    ("ex14_remote_shards", "shards_beat_objects"):
        "Every request to object storage waits its first-byte latency: under the emulated `region` network, {name} "
        "ran {ratio} as fast as {baseline_name}, one GET per object. Store small samples in shards and stream them.",
    ("ex14_remote_shards", "in_flight_reaches_the_model"):
        "Throughput from object storage comes from requests in flight: {name} ran {ratio} as fast as {baseline_name} "
        "under the emulated `region` network at 200 ms first-byte latency. Keep as many requests open as throughput "
        "times each request's time (Little's law), within what your CPU can issue.",
}
GENERIC_LESSON = "{name} ran {ratio} as fast as {baseline_name}, on {cores}."
WORKERS = re.compile(r"(\d+) workers?\b")
CAPSTONE_FIELDS = ("epoch", "wall_s", "val_accuracy", "images_per_s", "stall_fraction")
MACHINE_LABELS = ("torch", "torchvision", TENSORFLOW, "GPU")  # read from the doctor's report
NO_GPU = "none"  # how the doctor's GPU line begins on a machine without one


def _shown(path: Path) -> str:
    """A path as the learner types it: from the course's folder where it lies inside."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


@dataclass
class Section:
    """One part of the page: a title, lines of prose, an optional table, and what the figures tell you."""

    title: str
    lines: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    chart: str = ""   # an inline SVG drawn from the section's own figures (the HTML page only)
    layout: str = ""  # HTML: "" the table (or the chart, which carries its figures), "beside" chart and table side
                      # by side, "inline" the rows as one line of facts


@dataclass
class Page:
    title: str
    lines: list[str]
    sections: list[Section]
    closing: list[str] = field(default_factory=list)


# ---- charts: inline SVG, drawn from figures already on the page (no external assets) ---------------------------

@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str
    tick: float | None   # a mark on the bar's row (a target)
    css: str             # met, below, yours, other


CHART_WIDTH, LABEL_WIDTH, ROW_HEIGHT = 640, 250, 18


def bar_chart(bars: list[Bar], caption: str, line: float | None = None) -> str:
    """Horizontal bars, one row each, with an optional tick per row and one dashed vertical line (a ceiling)."""
    top = max([b.value for b in bars] + [b.tick or 0 for b in bars] + [line or 0]) * 1.15 or 1.0
    span = CHART_WIDTH - LABEL_WIDTH - 10
    height = ROW_HEIGHT * len(bars) + 24
    x = lambda value: LABEL_WIDTH + span * value / top  # noqa: E731
    parts = []
    for row, bar in enumerate(bars):
        y = ROW_HEIGHT * row + 4
        parts.append(f'<text x="{LABEL_WIDTH - 6}" y="{y + 12}" text-anchor="end">{html.escape(bar.label[:40])}</text>'
                     f'<rect class="{bar.css}" x="{LABEL_WIDTH}" y="{y + 2}" width="{x(bar.value) - LABEL_WIDTH:.1f}" '
                     f'height="{ROW_HEIGHT - 5}"/><text x="{x(bar.value) + 4:.1f}" y="{y + 12}">'
                     f"{html.escape(bar.text)}</text>")
        if bar.tick is not None:
            parts.append(f'<line class="tick" x1="{x(bar.tick):.1f}" x2="{x(bar.tick):.1f}" y1="{y}" '
                         f'y2="{y + ROW_HEIGHT}"/>')
    if line:
        parts.append(f'<line class="ceiling" x1="{x(line):.1f}" x2="{x(line):.1f}" y1="0" y2="{height - 20}"/>')
    parts.append(f'<text class="caption" x="{LABEL_WIDTH}" y="{height - 6}">{html.escape(caption)}</text>')
    return (f'<svg class="chart" viewBox="0 0 {CHART_WIDTH} {height}" width="{CHART_WIDTH}" height="{height}" '
            f'role="img" aria-label="{html.escape(caption, quote=True)}">{"".join(parts)}</svg>')


def line_chart(points: list[tuple[float, float]], caption: str) -> str:
    """Validation accuracy (0-1) against wall time (s): a line through the epochs, each one a dot."""
    width, height, left, bottom = CHART_WIDTH, 200, 50, 30
    right_s = max(p[0] for p in points) * 1.05 or 1.0
    top = min(1.0, max(p[1] for p in points) * 1.15) or 1.0
    x = lambda s: left + (width - left - 10) * s / right_s  # noqa: E731
    y = lambda a: height - bottom - (height - bottom - 10) * a / top  # noqa: E731
    path = " ".join(f"{x(s):.1f},{y(a):.1f}" for s, a in points)
    dots = "".join(f'<circle cx="{x(s):.1f}" cy="{y(a):.1f}" r="3"/>' for s, a in points)
    axes = (f'<line class="axis" x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}"/>'
            f'<line class="axis" x1="{left}" y1="10" x2="{left}" y2="{height - bottom}"/>'
            f'<text x="{left - 4}" y="{y(top) + 4:.1f}" text-anchor="end">{top:.0%}</text>'
            f'<text x="{left - 4}" y="{height - bottom}" text-anchor="end">0%</text>'
            f'<text x="{x(points[-1][0]):.1f}" y="{height - bottom + 14}" text-anchor="middle">'
            f"{points[-1][0]:.0f} s</text>"
            f'<text x="{left}" y="{height - bottom + 14}">0 s</text>')
    return (f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{html.escape(caption, quote=True)}">{axes}<polyline class="accuracy" points="{path}"/>{dots}'
            f'<text class="caption" x="{left + 8}" y="{height - 2}">{html.escape(caption)}</text></svg>')


# ---- the machine -------------------------------------------------------------------------------------------

def _gib(value: Any) -> str:
    return f"{value} GiB" if isinstance(value, (int, float)) else "unknown"


def machine_section(now: dict[str, Any], doctor: Report, graded_on: dict[str, Any] | None) -> Section:
    """This machine's facts (`loaderlab.machine.facts()` and the doctor's versions and GPU), and its warnings."""
    reported = dict(doctor.facts)
    section = Section("This machine", header=["fact", "value"], layout="inline")
    section.rows = [["platform", str(now.get("platform", "unknown"))],
                    ["python", str(now.get("python", "unknown"))],
                    ["usable cores",
                     f"{now.get('usable_cores', '?')} (os.cpu_count() says {now.get('cpu_count', '?')})"],
                    ["memory", _gib(now.get("ram_gib"))],
                    ["/dev/shm", _gib(now.get("shm_gib")) if now.get("shm_gib") else "none on this OS"],
                    ["start method", str(now.get("start_method", "unknown"))]]
    section.rows += [[label, reported[label]] for label in MACHINE_LABELS if label in reported]
    gpu = reported.get("GPU", "")
    if gpu.startswith(NO_GPU):
        cuda = [e.short for e in exercises() if any(c.cuda_only for c in e.checks)]
        section.notes.append("No GPU here: the course emulated the accelerator step"
                             + (f", and the CUDA-only checks of {' and '.join(cuda)} cannot run on this machine."
                                if cuda else "."))
    section.notes += [f"The doctor warns: {warning}" for warning in doctor.warnings]
    if graded_on:
        changed = [f"{label} {graded_on.get(key)} (now {now.get(key)})"
                   for key, label in (("usable_cores", "usable cores"), ("ram_gib", "memory GiB"),
                                      ("start_method", "start method")) if graded_on.get(key) != now.get(key)]
        if changed:
            section.notes.append("Your latest grades were saved on a different machine or set-up: "
                                 + ", ".join(changed) + ". Their figures describe that one; `make grade` here "
                                 "measures this one.")
    return section


# ---- the grades ----------------------------------------------------------------------------------------------

def _cores(metrics: dict[str, Any]) -> str:
    free = metrics.get("free_cores")
    cores = f"{metrics.get('cores', '?')} cores"
    return cores if not isinstance(free, (int, float)) else f"{cores} ({free:.1f} free)"


def _has_figures(metrics: Any) -> bool:
    needed = ("candidate_ips", "baseline_ips", "ratio")
    return isinstance(metrics, dict) and all(isinstance(metrics.get(k), (int, float)) for k in needed)


def _figures(exercise: str, check: str, metrics: dict[str, Any]) -> str:
    """What a timed check's saved figures say to do, and how it stands against its target."""
    workers = {key: WORKERS.search(str(metrics.get(key, ""))) for key in ("name", "baseline_name")}
    values = {"ratio": f"{metrics['ratio']:.2f}x", "cores": _cores(metrics), "name": metrics.get("name", check),
              "baseline_name": metrics.get("baseline_name", "its baseline"),
              "chosen": workers["name"].group(1) if workers["name"] else "?",
              "best": workers["baseline_name"].group(1) if workers["baseline_name"] else "?"}
    lesson = LESSONS.get((exercise, check), GENERIC_LESSON)
    if "{chosen}" in lesson and not workers["name"]:
        lesson = GENERIC_LESSON
    text = f"{exercise[:4]}: " + lesson.format(**values)
    target = metrics.get("target")
    if isinstance(target, (int, float)) and metrics["ratio"] < target:
        text += (f" That is below its {target:.2f}x target: {hint_for_check(exercise, check)} "
                 f"(next: `{next_hint_command(exercise, check)}`)")
    return text


def _missing(exercise: Exercise, check: Check, saved: dict[str, Any] | None, gpu: bool) -> str | None:
    """Why a timed check has no saved figure, in a few words; None where it cannot have one here (CUDA, no GPU)."""
    if check.cuda_only and not gpu and (saved is None or saved.get("status") in (PASS, SKIPPED)):
        return None
    if saved is None:
        return "no figure yet"
    status = str(saved.get("status", "?"))
    if status == PASS:
        return "passed, no figure saved"
    if status == SKIPPED:
        return f"not graded here: {short_reason(str(saved.get('message', '')))}"
    return status


def _saved(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    saved = results.get("exercises") if isinstance(results.get("exercises"), dict) else {}
    return {name: entry for name, entry in saved.items() if isinstance(entry, dict)}


def measured(results: dict[str, Any]) -> list[tuple[Exercise, Check, dict[str, Any]]]:
    """(exercise, timed check, its saved figures) for every timed check that saved figures, in course order."""
    saved = _saved(results)
    found = []
    for exercise in exercises():
        checks = {str(c.get("check")): c for c in saved_checks(saved.get(exercise.name))}
        for check in exercise.checks:
            metrics = checks.get(check.name, {}).get("metrics")
            if check.timed and _has_figures(metrics):
                found.append((exercise, check, metrics))
    return found


def measured_figures(results: dict[str, Any]) -> list[tuple[Exercise, Check, dict[str, Any]]]:
    """(exercise, check, its saved figure) for every check that saved a figure against a limit (the capstone's data
    stall and accuracy, timed; exercise 16's seconds from a hung rank to the restart, a job's), in course order."""
    saved = _saved(results)
    return [(exercise, check, metrics) for exercise in exercises()
            for check in exercise.checks
            for metrics in [{str(c.get("check")): c for c in saved_checks(saved.get(exercise.name))}
                            .get(check.name, {}).get("metrics")] if is_measured(metrics)]


def _ratio(metrics: dict[str, Any]) -> str:
    target = metrics.get("target")
    return f"{metrics['ratio']:.2f}x" + ("" if not isinstance(target, (int, float)) else
                                          " ok" if metrics["ratio"] >= target else " below")


# What each timed check's saved name says you chose, where it says one (the grader names the candidate).
CHOICES: dict[tuple[str, str], str] = {
    ("ex04_fast_dataloader", "twice_the_tutorial_configuration"): "your DataLoader (exercise 04)",
    ("ex05_choose_workers", "real_sweep_choice_is_near_the_best"): "DataLoader workers (exercise 05's chooser)",
    ("ex07_tfdata_pipeline", "cached_epoch_is_fast"): "your tf.data pipeline (exercise 07)",
    ("ex08_shards", "shards_beat_one_request_per_file"): "data format (exercise 08)",
    ("ex11_training_script", "beats_the_original_throughput"): "your training loop (exercise 11)",
}
CAPSTONE_SETTINGS = ("device", "num_workers", "pin_memory", "torch_threads", "batch_size")


def chosen_section(results: dict[str, Any], now: dict[str, Any], run: CapstoneRun | None) -> Section:
    """The configurations the learner chose on this machine, each with the figure behind it."""
    section = Section("What you chose on this machine", header=["what", "your choice", "measured"])
    for exercise, check, metrics in measured(results):
        label = CHOICES.get((exercise.name, check.name))
        if not label:
            continue
        name = str(metrics.get("name", check.name))
        workers = WORKERS.search(name)
        choice = f"num_workers={workers.group(1)}" if check.name == "real_sweep_choice_is_near_the_best" and workers \
            else name
        section.rows.append([label, choice, f"{_ratio(metrics)} vs {metrics.get('baseline_name', 'its baseline')}"])
    methods = sorted({str(e.get("start_method")) for e in _saved(results).values() if e.get("start_method")})
    if methods:
        section.rows.append(["worker start method", " and ".join(methods),
                             f"grades saved under it; this machine's default: {now.get('start_method', '?')}"])
    if run is not None:
        settings = ", ".join(f"{k}={run.settings[k]}" for k in CAPSTONE_SETTINGS if k in run.settings)
        if settings:
            section.rows.append(["capstone training run", settings, f"`make capstone`, profile {run.profile}"])
    return section


def figures_section(results: dict[str, Any]) -> Section:
    """Every timed check with a saved figure: its ratio against its target (a chart), and what it says to do."""
    section = Section("Your figures", header=["exercise", "timed check", "ratio", "target", "cores"])
    bars = []
    for exercise, check, metrics in measured(results):
        target = metrics.get("target")
        section.rows.append([exercise.short, check.name, _ratio(metrics),
                             f"{target:.2f}x" if isinstance(target, (int, float)) else "-", _cores(metrics)])
        section.notes.append(_figures(exercise.name, check.name, metrics))
        bars.append(Bar(f"{exercise.short} {check.name}", metrics["ratio"], f"{metrics['ratio']:.2f}x",
                        target if isinstance(target, (int, float)) else None,
                        "below" if isinstance(target, (int, float)) and metrics["ratio"] < target else "met"))
    for exercise, check, metrics in measured_figures(results):  # a figure against its limit: a stall, an accuracy
        value, bound, verdict = measured_cells(metrics)
        section.rows.append([exercise.short, check.name, f"{value} ({metrics.get('name', '')}) {verdict}", bound, "-"])
        if metrics.get("note"):
            section.notes.append(f"{exercise.short}: {metrics.get('name', check.name)}: {metrics['note']}.")
    if bars:
        section.chart = bar_chart(bars, "ratio (candidate / baseline, measured in the same run); tick: its target")
    return section


def read_league(path: Path) -> dict[str, Any]:
    """`make league`'s JSON (`league.table.run_league`); FileNotFoundError when absent, ValueError when it is
    not one."""
    try:
        league = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot be read ({error})") from None
    rows = league.get("rows") if isinstance(league, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in rows):
        raise ValueError("holds no league rows")
    for row in rows:
        median = row.get("median")
        if median is not None and (isinstance(median, bool) or not isinstance(median, (int, float))
                                   or not math.isfinite(median) or median < 0):
            raise ValueError(f"{row['name']}'s median is {median!r}, not a number of images/s")
    ceiling = league.get("ceiling")
    if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float))
                                or not math.isfinite(ceiling)):
        raise ValueError(f"the ceiling is {ceiling!r}, not a number of images/s")
    return league


def league_section(path: Path) -> Section | None:
    """The league's ranked loaders as bars, yours highlighted, against the decode-only ceiling; None when there is
    no league file (the closing line names `make league`)."""
    section = Section("Your loaders in the league table")
    try:
        league = read_league(path)
    except FileNotFoundError:
        return None
    except ValueError as error:
        section.lines.append(f"`{_shown(path)}` {error}, so it is left out: `make league` runs the league again "
                             "and rewrites it.")
        return section
    ranked = sorted((r for r in league["rows"] if r.get("status") == "ranked" and r.get("median")),
                    key=lambda r: -r["median"])
    ceiling = league.get("ceiling")
    section.lines.append(f"From `{_shown(path)}`: profile {league.get('profile', '?')}, {league.get('cores', '?')} "
                         f"cores, {league.get('images', '?')} images x {league.get('rounds', '?')} round(s), "
                         f"{league.get('date', '?')}.")
    section.header = ["loader", "images/s", "share of the decode-only ceiling"]
    yours = [r for r in ranked if _is_yours(r)]
    for row in ranked:
        share = f"{row['median'] / ceiling:.0%}" if ceiling else "-"
        section.rows.append([row["name"] + (" (yours)" if _is_yours(row) else ""), f"{row['median']:.0f}",
                             share])
    if ranked:
        section.chart = bar_chart([Bar(r["name"] + (" (yours)" if _is_yours(r) else ""), r["median"],
                                       f"{r['median']:.0f}/s" + (f", {r['median'] / ceiling:.0%}" if ceiling else ""),
                                       None,
                                       "yours" if _is_yours(r) else "other") for r in ranked],
                                  "images/s, median over rounds" + ("; dashed: decode only" if ceiling else ""),
                                  line=ceiling)
    if not yours:
        section.notes.append("None of your loaders is ranked in it yet: `make league` after exercises 04, 07 and 08 "
                             "pass puts them there.")
    return section


def _is_yours(row: dict[str, Any]) -> bool:
    """Whether a league row is the learner's exercise, as `make league` saved it (the playbook reads the data, not
    the league application)."""
    return row.get("yours") is True


def not_yet(results: dict[str, Any], gpu: bool, capstone: bool, league: bool) -> list[str]:
    """The one closing line: what is not graded or not run yet, and the commands that measure it."""
    saved = _saved(results)
    ungraded = [e.short for e in exercises() if e.name not in saved]
    missing = []
    for exercise in exercises():
        if exercise.name not in saved:
            continue
        checks = {str(c.get("check")): c for c in saved_checks(saved[exercise.name])}
        for check in exercise.checks:
            metrics = checks.get(check.name, {}).get("metrics")
            if check.timed and not (_has_figures(metrics) or is_measured(metrics)):  # a ratio, or a figure and limit
                why = _missing(exercise, check, checks.get(check.name), gpu)
                if why:
                    missing.append(f"{exercise.short} {check.name} ({why})")
    cuda = [e.short for e in exercises() if e.name in saved and not gpu
            and any(c.cuda_only and c.timed for c in e.checks)]
    parts = []
    if ungraded:
        parts.append(f"not graded: {', '.join(ungraded)} (`make grade`, or `make watch EX=..`)")
    if missing:
        parts.append(f"no figure yet: {', '.join(missing)} (`make watch EX=..`, `make hint EX=..`)")
    if cuda:
        parts.append(f"timed on a CUDA GPU only: {', '.join(cuda)}")
    if not league:
        parts.append("no league run (`make league`)")
    if not capstone:
        parts.append("no capstone run (`make capstone`)")
    return ["Not yet on this page: " + "; ".join(parts) + "."] if parts else []


def grades_summary(results: dict[str, Any], results_path: Path) -> list[str]:
    """Lines on the grades as a whole: how many exercises are done, and whether timing ran on a busy machine."""
    if not results:
        return [f"No saved grades at `{_shown(results_path)}`: `make grade` grades every exercise and saves them "
                "there."]
    saved = results.get("exercises") if isinstance(results.get("exercises"), dict) else {}
    done = sum(group_status(e.checks, saved_checks_of(saved.get(e.name), e.name)) == DONE for e in exercises())
    lines = [f"{done} of {len(exercises())} exercises done (grades from `{_shown(results_path)}`"
             + (f", learner {results['learner']}" if results.get("learner") else "") + ")."]
    try:
        busy = busy_while_timing([c for name, entry in saved.items() for c in saved_results(entry, name)])
    except (TypeError, KeyError):
        busy = None
    if busy:
        lines.append(f"The machine was busy during some timing: as few as {busy[0]:.1f} of {busy[1]} cores were "
                     "free. Ratios measured then say less than usual; close other programs and `make grade` again.")
    return lines


# ---- the capstone's training run ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Epoch:
    """One epoch of the capstone's run, as `loaderlab.training.EpochRecord` saves it (stall_fraction None where
    nothing measured it)."""

    epoch: int
    wall_s: float
    val_accuracy: float
    images_per_s: float
    stall_fraction: float | None


@dataclass(frozen=True)
class CapstoneRun:
    profile: str
    settings: dict[str, Any]
    epochs: tuple[Epoch, ...]


def _number(record: dict[str, Any], name: str, low: float, high: float) -> float:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise ValueError(f"epoch record {record.get('epoch', '?')}: {name} is {value!r}, "
                         f"not a number in {low:g}..{high:g}")
    return float(value)


def read_capstone(path: Path) -> CapstoneRun:
    """The run `make capstone` saved (`loaderlab.training.TrainingRun.to_dict()`: {"profile", "settings",
    "records": [EpochRecord fields]}); FileNotFoundError when absent, ValueError saying what is wrong otherwise.

    Read here rather than with `TrainingRun.from_dict`, which trusts the file: a page must survive a bad one.
    """
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot be read ({error})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"is not valid JSON ({error.msg}, line {error.lineno})") from None
    records = payload.get("records") if isinstance(payload, dict) else None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise ValueError("holds no epoch records")
    epochs = []
    for record in records:
        epoch = record.get("epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise ValueError(f"an epoch record's epoch is {epoch!r}, not a whole number")
        epochs.append(Epoch(epoch, _number(record, "wall_s", 0, math.inf),
                            _number(record, "val_accuracy", 0, 1), _number(record, "images_per_s", 0, math.inf),
                            None if record.get("stall_fraction") is None else _number(record, "stall_fraction", 0, 1)))
    settings = payload.get("settings")
    return CapstoneRun(str(payload.get("profile", "?")), settings if isinstance(settings, dict) else {}, tuple(epochs))


def _spread(values: list[float], form: str, unit: str = "") -> str:
    """The median of the epochs' figures, and their range where it is not one value."""
    low, high = form.format(min(values)), form.format(max(values))
    spread = "" if low == high else f" (epochs ranged {low}-{high}{unit})"
    return form.format(statistics.median(values)) + unit + spread


def capstone_run(path: Path) -> tuple[CapstoneRun | None, str]:
    """The saved run, or None and the line that says why there is none."""
    try:
        return read_capstone(path), ""
    except FileNotFoundError:
        return None, (f"No training run saved at `{_shown(path)}`: `make capstone` trains the fixed script for the "
                      "profile's epoch budget and saves it there.")
    except ValueError as error:
        return None, f"`{_shown(path)}` {error}, so it is left out: `make capstone` trains again and rewrites it."


def capstone_section(path: Path, profile: str) -> Section:
    """Final accuracy, the time to reach it, the stall fraction and throughput of the saved run, with accuracy
    against wall time drawn; or what is missing."""
    section = Section("Capstone: your training run")
    run, why = capstone_run(path)
    if run is None:
        if path.exists():  # a file that is not a run says so here; no file at all is the closing line's
            section.lines.append(why)
        return section
    last = run.epochs[-1]
    reached = next(e for e in run.epochs if e.val_accuracy >= last.val_accuracy)
    best = max(run.epochs, key=lambda e: e.val_accuracy)
    stalls = [e.stall_fraction for e in run.epochs if e.stall_fraction is not None]
    section.lines.append(f"From `{_shown(path)}`: profile {run.profile}, {len(run.epochs)} epochs"
                         + (", " + ", ".join(f"{k}={v}" for k, v in sorted(run.settings.items())
                                             if isinstance(v, (str, int, float, bool)) or v is None)
                            if run.settings else "") + ".")
    section.header = ["figure", "value"]
    section.rows = [["final validation accuracy",
                     f"{last.val_accuracy:.1%} after epoch {last.epoch}, {last.wall_s:.0f} s"],
                    ["time to reach it", f"{reached.wall_s:.0f} s (epoch {reached.epoch})"],
                    ["data-stall fraction", _spread(stalls, "{:.1%}") if stalls else "not measured in this run"],
                    ["training throughput", _spread([e.images_per_s for e in run.epochs], "{:.0f}", " images/s")]]
    if best.val_accuracy > last.val_accuracy:
        section.rows.insert(2, ["best validation accuracy", f"{best.val_accuracy:.1%} at epoch {best.epoch}, "
                                                            f"{best.wall_s:.0f} s"])
    section.notes = [
        f"Time-to-accuracy is the figure to compare: {last.val_accuracy:.1%} in {reached.wall_s:.0f} s. After a "
        "change to the script, `make capstone` again and compare this line, not images/s alone.",
    ]
    if stalls:
        stall = statistics.median(stalls)
        section.notes.append(f"The step waited for its batch {stall:.1%} of the training loop's time (median "
                             f"epoch): no faster loader can save more than that share here; the rest, "
                             f"{1 - stall:.1%}, is the step itself.")
    if run.profile != profile:
        section.notes.append(f"This run used the {run.profile} profile, the grades above the {profile} profile's "
                             "data: compare figures within one profile.")
    section.chart = line_chart([(e.wall_s, e.val_accuracy) for e in run.epochs],
                               "validation accuracy against wall time, one dot per epoch")
    section.layout = "beside"
    return section


# ---- the page --------------------------------------------------------------------------------------------------

def build(results: dict[str, Any], results_path: Path, capstone_path: Path, machine: dict[str, Any],
          doctor: Report, written: datetime.datetime, commit: str | None, profile: str,
          league_path: Path | None = None) -> Page:
    """The whole page from what was saved and what the machine says (nothing here measures anything)."""
    gpu = not dict(doctor.facts).get("GPU", NO_GPU).startswith(NO_GPU)
    graded_on = results.get("machine") if isinstance(results.get("machine"), dict) else None
    lines = [f"Written {written:%Y-%m-%d %H:%M} UTC from course commit {commit or 'unknown (not a git checkout)'}, "
             f"profile {profile} (LOADERLAB_PROFILE; the grades file does not record each grade's profile).",
             *grades_summary(results, results_path)]
    run, _ = capstone_run(capstone_path)
    league = league_section(league_path) if league_path is not None else None
    sections = [chosen_section(results, machine, run), figures_section(results), *([league] if league else []),
                capstone_section(capstone_path, profile), machine_section(machine, doctor, graded_on)]
    sections = [s for s in sections if s.rows or s.lines or s.notes]
    closing = not_yet(results, gpu, capstone=run is not None, league=league is not None)
    return Page("Your loaderlab playbook", lines, sections, closing)


def markdown(page: Page) -> str:
    """The page as Markdown (the charts' figures are in the tables)."""
    out = [f"# {page.title}", "", *[line for text in page.lines for line in (text, "")]]
    for section in page.sections:
        out += [f"## {section.title}", ""]
        out += [line for text in section.lines for line in (text, "")]
        if section.rows:
            out += ["| " + " | ".join(section.header) + " |", "|" + "---|" * len(section.header)]
            out += ["| " + " | ".join(markdown_cell(cell) for cell in row) + " |" for row in section.rows]
            out.append("")
        if section.notes:
            out += ["What this tells you:", "", *[f"- {note}" for note in section.notes], ""]
    out += [line for text in page.closing for line in (text, "")]
    return "\n".join(out).rstrip() + "\n"


def _inline(text: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _css(cell: str) -> str:
    """The scoreboard's colours: a ratio that met its target, one below it."""
    return "pass" if cell.endswith(" ok") else "fail" if cell.endswith(" below") else ""


PLAYBOOK_STYLE = """body{max-width:60em;margin:1.5em auto;font-size:14px}h1{margin:0 0 .2em}h2{margin:1em 0 .3em;
font-size:1.15em;border-bottom:1px solid #ddd}p{margin:.3em 0}table{margin:.4em 0}th,td{padding:.15em .5em}
ul{margin:.3em 0;padding-left:1.4em}li{margin:.1em 0}svg.chart{display:block;max-width:100%;height:auto;
font:11px system-ui,sans-serif}svg .met,svg .other{fill:#4c72b0}svg .below{fill:#c44e52}svg .yours{fill:#dd8452}
svg .tick{stroke:#222;stroke-width:2}svg .ceiling{stroke:#c44e52;stroke-dasharray:4 3}svg .axis{stroke:#999}
svg .accuracy{fill:none;stroke:#4c72b0;stroke-width:2}svg circle{fill:#4c72b0}svg .caption{fill:#555}
p.closing{margin-top:1em;color:#444;font-size:.95em}div.beside{display:flex;gap:1.5em;align-items:flex-start}
div.beside svg.chart{width:55%}ul{columns:2;column-gap:2em}li{break-inside:avoid}p.facts{font-size:.95em}
@page{size:A4;margin:9mm}@media print{body{margin:0;font-size:8.5px;max-width:none}h1{font-size:1.6em}
h2{margin:.4em 0 .15em}svg.chart{max-height:15em;width:auto}li{margin:0}table{margin:.2em 0}}"""


def page_html(page: Page) -> str:
    """The page as one static HTML file (no external assets): tables, inline SVG charts, one page when printed."""
    parts = [f"<h1>{html.escape(page.title)}</h1>", *[f"<p>{_inline(line)}</p>" for line in page.lines]]
    for section in page.sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{_inline(line)}</p>" for line in section.lines]
        head = "".join(f"<th>{html.escape(h)}</th>" for h in section.header)
        body = "".join("<tr>" + "".join(f'<td class="{_css(c)}">{_inline(c)}</td>' for c in row) + "</tr>"
                       for row in section.rows)
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if section.rows else ""
        if section.layout == "inline":
            parts.append('<p class="facts">' + " · ".join(f"{_inline(row[0])}: <b>{_inline(row[1])}</b>"
                                                          for row in section.rows) + "</p>")
        elif section.layout == "beside":
            parts.append(f'<div class="beside">{section.chart}{table}</div>')
        else:
            parts.append(section.chart or table)  # a chart is drawn from the table's own figures
        if section.notes:
            parts.append("<ul>" + "".join(f"<li>{_inline(n)}</li>" for n in section.notes) + "</ul>")
    parts += [f'<p class="closing">{_inline(line)}</p>' for line in page.closing]
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(page.title)}</title>'
            f"<style>{PAGE_STYLE}\n{PLAYBOOK_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.playbook", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=GRADER_DIR / "results.json",
                        help="the grades to read (default: .grader/results.json)")
    parser.add_argument("--capstone", type=Path, default=GRADER_DIR / "capstone.json",
                        help="the capstone's saved training run (default: .grader/capstone.json)")
    parser.add_argument("--league", type=Path, default=GRADER_DIR / "league.json",
                        help="the league table `make league` saved (default: .grader/league.json)")
    parser.add_argument("--out", type=Path, default=GRADER_DIR,
                        help="folder for playbook.md and playbook.html (default: .grader)")
    args = parser.parse_args(argv)
    page = build(read_results(args.results), args.results, args.capstone, facts(), diagnose(),
                 datetime.datetime.now(datetime.timezone.utc), course_commit(), active_profile(), args.league)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "playbook.md").write_text(markdown(page), encoding="utf-8")
    (args.out / "playbook.html").write_text(page_html(page), encoding="utf-8")
    print(f"wrote {args.out / 'playbook.md'} and {args.out / 'playbook.html'}")


if __name__ == "__main__":
    main()
