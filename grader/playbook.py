"""python -m grader.playbook [--results PATH] [--capstone PATH] [--out DIR]: the page you keep (make playbook).

Writes `.grader/playbook.md` and `.grader/playbook.html`: this machine's facts, your saved grades module by
module (each timed check's throughput, its baseline's, the ratio, the target, the cores, and what the figure
says to do, such as the worker count exercise 05 chose), and the capstone's training run from
`.grader/capstone.json` when there is one. Nothing is run or timed here, and nothing is invented: where a figure
is missing, the page names the command that measures it.
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import math
import re
import statistics
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from grader.catalog import Check, Exercise, exercises
from grader.collect import PAGE_STYLE, markdown_cell, saved_checks
from grader.hints import hint_for_check, next_hint_command
from grader.progress import DONE, NOT_GRADED, check_statuses, group_status
from grader.results import (NOT_STARTED, NOT_TIMED, PASS, CheckResult, busy_while_timing, course_commit, is_measured,
                            measured_cells, read_results)
from loaderlab.doctor import TENSORFLOW, Report, diagnose
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


@dataclass
class Page:
    title: str
    lines: list[str]
    sections: list[Section]


# ---- the machine -------------------------------------------------------------------------------------------

def _gib(value: Any) -> str:
    return f"{value} GiB" if isinstance(value, (int, float)) else "unknown"


def machine_section(now: dict[str, Any], doctor: Report, graded_on: dict[str, Any] | None) -> Section:
    """This machine's facts (`loaderlab.machine.facts()` and the doctor's versions and GPU), and its warnings."""
    reported = dict(doctor.facts)
    section = Section("This machine", header=["fact", "value"])
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
                 f"(more: `{next_hint_command(exercise, check)}`)")
    return text


def _missing(exercise: Exercise, check: Check, saved: dict[str, Any] | None, gpu: bool) -> tuple[str, str]:
    """(table cell, why) for a timed check with no saved figure: why, and the command that measures it."""
    short = exercise.short
    if check.cuda_only and not gpu and (saved is None or saved.get("status") == PASS):
        return "needs CUDA", "needs a CUDA GPU, and there is none here, so no figure."
    if saved is None:
        return "not timed yet", f"no figure yet; `make grade` (or `make watch EX={short}`) measures it."
    status = str(saved.get("status", "?"))
    if status == PASS:
        return "passed, no figure", "passed; the grader saved no figure with it."
    if status in (NOT_TIMED, NOT_STARTED):
        return status, f"{status}; the timing runs once the correctness steps pass (`make watch EX={short}`)."
    first_line = str(saved.get("message", "")).strip().splitlines()[:1]
    return status, (status + (f" ({first_line[0][:160]})" if first_line else "")
                    + f"; `make watch EX={short}`, `make hint EX={short}`.")


def _missing_notes(exercise: Exercise, missing: dict[str, str]) -> list[str]:
    """One note per distinct reason, naming the checks it applies to ({check: why})."""
    by_reason: dict[str, list[str]] = {}
    for check, why in missing.items():
        by_reason.setdefault(why, []).append(check)
    return [f"{exercise.short} {', '.join(checks)}: {why}" for why, checks in by_reason.items()]


def _graded(entry: dict[str, Any] | None, commit: str | None) -> str:
    if not entry or not entry.get("when"):
        return "-"
    text = str(entry["when"])[:16].replace("T", " ")
    if entry.get("target") not in (None, "exercises"):
        text += f", on {entry['target']}/"
    if commit and entry.get("commit") and entry["commit"] != commit:
        text += f", at {entry['commit']}"
    return text


def exercise_rows(exercise: Exercise, entry: dict[str, Any] | None, commit: str | None,
                  gpu: bool) -> tuple[list[list[str]], list[str]]:
    """The table rows (one per timed check) and the notes of one exercise, from its saved entry."""
    statuses = check_statuses(entry)
    status = group_status(exercise.checks, statuses)
    saved = {str(c.get("check")): c for c in saved_checks(entry)}
    lead = [exercise.name, status, _graded(entry, commit)]
    rows, notes, missing = [], [], {}
    timed = [c for c in exercise.checks if c.timed]
    for index, check in enumerate(timed):
        first = lead if index == 0 else ["", "", ""]
        metrics = saved.get(check.name, {}).get("metrics")
        if _has_figures(metrics):
            unit = metrics.get("unit", "items")
            target = metrics.get("target")
            verdict = "" if not isinstance(target, (int, float)) else (
                " ok" if metrics["ratio"] >= target else " below")
            rows.append(first + [check.name, f"{metrics['candidate_ips']:.1f} {unit}/s",
                                 f"{metrics['baseline_ips']:.1f} {unit}/s", f"{metrics['ratio']:.2f}x{verdict}",
                                 f"{target:.2f}x" if isinstance(target, (int, float)) else "-", _cores(metrics)])
            notes.append(_figures(exercise.name, check.name, metrics))
        elif is_measured(metrics):  # a figure against its limit (a stall fraction, an accuracy)
            value, bound, verdict = measured_cells(metrics)
            rows.append(first + [check.name, f"{value} ({metrics.get('name', '')})", "-", verdict, bound, "-"])
            if metrics.get("note"):
                notes.append(f"{exercise.short}: {metrics.get('name', check.name)}: {metrics['note']}.")
        else:
            cell = NOT_GRADED
            if entry is not None:
                cell, missing[check.name] = _missing(exercise, check, saved.get(check.name), gpu)
            rows.append(first + [check.name, cell, "-", "-", "-", "-"])
    if not timed:
        rows.append(lead + ["(none timed)", NOT_GRADED if entry is None else "-", "-", "-", "-", "-"])
    if entry is None:
        return rows, [f"{exercise.short}: not graded yet; `make grade` (or `make watch EX={exercise.short}`) grades "
                      "it and saves its figures."]
    return rows, notes + _missing_notes(exercise, missing)


GRADE_HEADER = ["exercise", "status", "graded (UTC)", "timed check", "yours", "baseline", "ratio", "target", "cores"]


def module_sections(results: dict[str, Any], commit: str | None, gpu: bool) -> list[Section]:
    """One section per course module, with a table of its exercises' timed checks."""
    saved = results.get("exercises") if isinstance(results.get("exercises"), dict) else {}
    sections: dict[str, Section] = {}
    for exercise in exercises():
        section = sections.setdefault(exercise.module, Section(
            f"Module {exercise.module}" + (f" (notebooks/{exercise.notebook}.ipynb)" if exercise.notebook else ""),
            header=GRADE_HEADER))
        entry = saved.get(exercise.name)
        rows, notes = exercise_rows(exercise, entry if isinstance(entry, dict) else None, commit, gpu)
        section.rows += rows
        section.notes += notes
    return list(sections.values())


def _saved_checks(results: dict[str, Any]) -> list[CheckResult]:
    """Every saved check as a CheckResult (those that are not one are left out)."""
    names = {f.name for f in fields(CheckResult)}
    checks = []
    saved_exercises = results.get("exercises") if isinstance(results.get("exercises"), dict) else {}
    for entry in saved_exercises.values():
        for saved in saved_checks(entry):
            try:
                checks.append(CheckResult(**{k: v for k, v in saved.items() if k in names}))
            except TypeError:
                continue
    return checks


def grades_summary(results: dict[str, Any], results_path: Path) -> list[str]:
    """Lines on the grades as a whole: how many exercises are done, and whether timing ran on a busy machine."""
    if not results:
        return [f"No saved grades at `{_shown(results_path)}`: `make grade` grades every exercise and saves them "
                "there; until then each module below says what is missing."]
    saved = results.get("exercises") if isinstance(results.get("exercises"), dict) else {}
    done = sum(group_status(e.checks, check_statuses(saved.get(e.name))) == DONE for e in exercises())
    lines = [f"{done} of {len(exercises())} exercises done (grades from `{_shown(results_path)}`"
             + (f", learner {results['learner']}" if results.get("learner") else "") + ")."]
    try:
        busy = busy_while_timing(_saved_checks(results))
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


def capstone_section(path: Path, profile: str) -> Section:
    """Final accuracy, the time to reach it, the stall fraction and throughput of the saved run; or what is missing."""
    section = Section("Capstone: your training run")
    try:
        run = read_capstone(path)
    except FileNotFoundError:
        section.lines.append(f"No training run saved at `{_shown(path)}`: `make capstone` trains the fixed script "
                             "for the profile's epoch budget and saves it there.")
        return section
    except ValueError as error:
        section.lines.append(f"`{_shown(path)}` {error}, so it is left out: `make capstone` trains again and "
                             "rewrites it.")
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
    return section


# ---- the page --------------------------------------------------------------------------------------------------

def build(results: dict[str, Any], results_path: Path, capstone_path: Path, machine: dict[str, Any],
          doctor: Report, written: datetime.datetime, commit: str | None, profile: str) -> Page:
    """The whole page from what was saved and what the machine says (nothing here measures anything)."""
    gpu = not dict(doctor.facts).get("GPU", NO_GPU).startswith(NO_GPU)
    graded_on = results.get("machine") if isinstance(results.get("machine"), dict) else None
    lines = [f"Written {written:%Y-%m-%d %H:%M} UTC from course commit {commit or 'unknown (not a git checkout)'}, "
             f"profile {profile} (LOADERLAB_PROFILE; the grades file does not record each grade's profile).",
             *grades_summary(results, results_path)]
    sections = [machine_section(machine, doctor, graded_on), *module_sections(results, commit, gpu),
                capstone_section(capstone_path, profile)]
    return Page("Your loaderlab playbook", lines, sections)


def markdown(page: Page) -> str:
    """The page as Markdown."""
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
    return "\n".join(out).rstrip() + "\n"


def _inline(text: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _css(cell: str) -> str:
    """The scoreboard's colours: a ratio that met its target, one below it."""
    return "pass" if cell.endswith(" ok") else "fail" if cell.endswith(" below") else ""


def page_html(page: Page) -> str:
    """The page as one static HTML file (no external assets)."""
    parts = [f"<h1>{html.escape(page.title)}</h1>", *[f"<p>{_inline(line)}</p>" for line in page.lines]]
    for section in page.sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{_inline(line)}</p>" for line in section.lines]
        if section.rows:
            head = "".join(f"<th>{html.escape(h)}</th>" for h in section.header)
            body = "".join("<tr>" + "".join(f'<td class="{_css(c)}">{html.escape(c)}</td>' for c in row) + "</tr>"
                           for row in section.rows)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        if section.notes:
            parts.append("<p>What this tells you:</p><ul>" + "".join(f"<li>{_inline(n)}</li>" for n in section.notes)
                         + "</ul>")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(page.title)}</title>'
            f"<style>{PAGE_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.playbook", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=GRADER_DIR / "results.json",
                        help="the grades to read (default: .grader/results.json)")
    parser.add_argument("--capstone", type=Path, default=GRADER_DIR / "capstone.json",
                        help="the capstone's saved training run (default: .grader/capstone.json)")
    parser.add_argument("--out", type=Path, default=GRADER_DIR,
                        help="folder for playbook.md and playbook.html (default: .grader)")
    args = parser.parse_args(argv)
    page = build(read_results(args.results), args.results, args.capstone, facts(), diagnose(),
                 datetime.datetime.now(datetime.timezone.utc), course_commit(), active_profile())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "playbook.md").write_text(markdown(page), encoding="utf-8")
    (args.out / "playbook.html").write_text(page_html(page), encoding="utf-8")
    print(f"wrote {args.out / 'playbook.md'} and {args.out / 'playbook.html'}")


if __name__ == "__main__":
    main()
