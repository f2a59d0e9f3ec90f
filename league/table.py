"""The league table: the course's loaders against what practitioners use, on the same work, and the machine's limit.

`python -m league [--profile P] [--rounds N] [--images N] [--entries a,b] [--out FILE]`

Every entry does the same work on the same images: read, decode, 256-short-side resize + 224 centre
crop, batches of 64 (uint8 (N, 3, 224, 224) images and their labels). Before any timing, each entry
passes the correctness gate in a process of its own: every sample once with its label, images
224 x 224 x 3, and the pixels of a few images (24 spread over the pass, and a file of every kind of file in it:
`data_gen.encodings`) within the course's tolerance of `loaderlab.images.reference_crop` (the course's: 2.0 levels
on average, 6.0 for any image). An
entry that does other work (a peer that skips the crop) is reported with the reason and not ranked;
a learner's exercise that is still a stub reads "not started"; a peer that is not installed is
listed with the command that adds it.

Timing: each entry runs in a fresh process per round (TensorFlow and torch never share one: see
tests/conftest.py), the entries interleaved round after round, in a rotated order. In that process a
short warm-up (two batches of a loader of its own: imports, tracing, page cache) comes first, then
one full pass of a new loader, timed from its construction (worker start-up counts, as in a first
epoch). The table gives the median over rounds, the spread (lowest-highest) and the share of two
ceilings, each reading the same files on a thread per usable core and doing nothing else: "full",
Pillow decoding every pixel; "DCT", a whole-frame decode at the smallest power-of-two DCT scale that
keeps the crop window at least 224 px (libjpeg-turbo, fancy upsampling): fast, not the least decoding
this work allows (a windowed decode or fast upsampling does less). A rejected peer is
timed too and shown under "not ranked" (greyed in the chart) with its reason, never in the ranking.

Beside the speed, the host's CPU milliseconds per image of the timed pass (`host_cpu_seconds`: the entry's process
and its worker processes): what feeding the accelerator costs the host's cores. The tf.data service entry's workers
and the Ray Data entry's task workers and Ray's own processes stand for other machines (ELSEWHERE), so only the
trainer counts: the trade disaggregation makes (notebook 11b) in one column. An entry that starts servers binding
every interface (`Entry.sandboxed`) runs in the course's sandbox, with a folder of its own removed after it, and where
none can be made it is listed with the reason.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from loaderlab.images import (CROP, MEAN_TOLERANCE, WORST_TOLERANCE, Sample, beyond, file_encodings, file_kind,
                              linked_split, list_samples, mean_abs_difference, named, reference_crop, spread_samples)
from loaderlab.machine import usable_cores
from loaderlab.paths import REPO_ROOT, dataset_dir
from loaderlab.processes import python_environment, stop_tree
from loaderlab.sandbox import sandboxed, unavailable as sandbox_unavailable
from loaderlab.tar_shards import sample_key, write_tar_shards

from league.entries import BATCH, BY_NAME, CEILINGS, CHILD_FOLDER_VARIABLE, Entry, Setup

PIXEL_CHECKS = 24           # images whose pixels the gate compares with the reference, spread over the pass
CHILD_TIMEOUT_S = 300
# Processes that stand for other machines, by what their command line holds: their CPU is not the host's, so
# `host_cpu_seconds` leaves them out.
ELSEWHERE = (
    "loaderlab.dataservice.servers",  # the tf.data service entry's dispatcher and workers
    "ray::",                          # the Ray Data entry's task workers once Ray has named them (ray::IDLE,
                                      # ray::MapBatches(...)) and its agents (ray::DashboardAgent, ...)
    "site-packages/ray/",             # Ray's own: raylet and gcs_server (binaries in ray/core/), a worker before its
                                      # name, the log monitor and the agents (scripts of the ray package)
)
RESULT_PREFIX = "LEAGUE-RESULT "
LOCAL_IMAGES = 640          # the local league's default


# ---- the gate (in the entry's process) --------------------------------------------------------------

class GateFailure(AssertionError):
    """The entry's output is not the league's work: the message says how, `brief` in a few words (the chart's label)."""

    def __init__(self, message: str, brief: str) -> None:
        super().__init__(message)
        self.brief = brief


def _as_array(x: Any) -> np.ndarray:
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def gate(batches: Iterable[Any], samples: list[Sample], batch_size: int) -> str:
    """Check one full pass against the reference; return a note on the layout and dtype, or raise GateFailure."""
    expected = {sample_key(s): i for i, s in enumerate(samples)}
    checked = set(np.linspace(0, len(samples) - 1, min(PIXEL_CHECKS, len(samples))).round().astype(int).tolist())
    kinds = {file_kind(s.path.read_bytes()).split(" ")[0]: i for i, s in reversed(list(enumerate(samples)))}
    checked |= set(kinds.values())  # the first file of every kind of file in the pass, whatever PIXEL_CHECKS picks
    seen: list[int] = []
    labels: dict[int, int] = {}
    differences: dict[int, float] = {}
    layouts, dtypes = set(), set()
    for number, batch in enumerate(batches):
        images, batch_labels = _as_array(batch[0]), _as_array(batch[1]).reshape(-1)
        n = len(images)
        if images.ndim != 4 or images.shape[1:] not in ((3, CROP, CROP), (CROP, CROP, 3)):
            raise GateFailure(f"batch {number}: images of shape {images.shape}, expected (N, 3, {CROP}, {CROP})",
                              f"images of shape {images.shape[1:]}")
        if not 0 < n <= batch_size or len(batch_labels) != n:
            raise GateFailure(f"batch {number}: {n} images and {len(batch_labels)} labels for batches of {batch_size}",
                              f"a batch of {n} images, {len(batch_labels)} labels")
        if images.dtype == np.float32 and 0.0 <= images.min() and images.max() <= 1.0:
            pixels = np.round(images * 255).astype(np.uint8)
        elif images.dtype == np.uint8:
            pixels = images
        else:
            raise GateFailure(f"batch {number}: images of dtype {images.dtype}, expected uint8", f"{images.dtype} images")
        if not np.issubdtype(batch_labels.dtype, np.integer):
            raise GateFailure(f"batch {number}: labels of dtype {batch_labels.dtype}, expected integers",
                              f"{batch_labels.dtype} labels")
        layouts.add("NCHW" if images.shape[1] == 3 else "NHWC")
        dtypes.add(str(images.dtype))
        keys = list(batch[2]) if len(batch) > 2 else None
        for row in range(n):
            index = expected.get(keys[row], -1) if keys else len(seen)
            if not 0 <= index < len(samples):
                raise GateFailure(f"batch {number}: a sample beyond the {len(samples)} of the tree ({keys and keys[row]})",
                                  "a sample not in the tree")
            seen.append(index)
            labels[index] = int(batch_labels[row])
            if index in checked:
                image = pixels[row] if images.shape[1] != 3 else pixels[row].transpose(1, 2, 0)
                differences[index] = mean_abs_difference(image, reference_crop(samples[index].path))
    if sorted(seen) != list(range(len(samples))):
        raise GateFailure(f"{len(seen)} samples in the pass ({len(set(seen))} distinct), expected each of "
                          f"{len(samples)} once", f"{len(set(seen))} of {len(samples)} samples")
    wrong = [i for i in range(len(samples)) if labels[i] != samples[i].label]
    if wrong:
        raise GateFailure(f"{len(wrong)} wrong labels, first {samples[wrong[0]].path.name}: {labels[wrong[0]]}, "
                          f"expected {samples[wrong[0]].label}", f"{len(wrong)} wrong labels")
    mean, worst = float(np.mean(list(differences.values()))), max(differences, key=differences.__getitem__)
    if mean > MEAN_TOLERANCE or differences[worst] > WORST_TOLERANCE:
        compared = sorted(differences)
        far = beyond([differences[i] for i in compared], [samples[i] for i in compared], WORST_TOLERANCE)
        raise GateFailure(f"pixels differ from the reference crop by {mean:.2f} levels on average (allowed "
                          f"{MEAN_TOLERANCE}) and {differences[worst]:.2f} at worst (allowed {WORST_TOLERANCE}, "
                          f"{named(samples[worst].path)}): not the 256 resize + 224 centre crop.{far}",
                          f"pixels {mean:.2f} levels off (allowed {MEAN_TOLERANCE})" if mean > MEAN_TOLERANCE
                          else f"an image {differences[worst]:.2f} levels off (allowed {WORST_TOLERANCE})")
    return f"{'/'.join(sorted(dtypes))} {'/'.join(sorted(layouts))}, pixels {mean:.2f} off on average"


# ---- one entry in its own process --------------------------------------------------------------------

def entry_builder(entry: Entry) -> Callable[[Setup], Iterable[Any]]:
    """The function that builds `entry`'s loader from a setup: its `build` ("module:function"), imported."""
    module, function = entry.build.split(":")
    return getattr(importlib.import_module(module), function)


def host_cpu_seconds() -> float:
    """CPU seconds (user and system) this process has used, with its children it has waited for and every living
    descendant (a DataLoader's workers, whether reaped or not), except the processes that stand for other machines
    (ELSEWHERE). Read before and after a pass: the difference is what the pass cost the host's cores (a descendant
    alive before the pass and reaped during it counts its whole life)."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    for child in psutil.Process().children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            if not any(marker in command for marker in ELSEWHERE):
                times = child.cpu_times()
                total += times.user + times.system
        except psutil.Error:   # ended meanwhile: counted in `reaped` once waited for
            continue
    return total


def run_child(entry: Entry, setup: Setup, mode: str) -> dict[str, Any]:
    """In the entry's own process: `check` runs the gate on one pass; `time` warms up, then times one full pass, and
    reads the host's CPU seconds it cost (`host_cpu_seconds`)."""
    from loaderlab.bench import count_batch, measure

    build = entry_builder(entry)
    setup = Setup(setup.root, setup.shards, entry.batch_size)

    def run() -> dict[str, Any]:
        if mode == "check":
            return {"status": "passed", "note": gate(build(setup), list_samples(setup.root), entry.batch_size)}
        measure(lambda: build(setup), count=count_batch, max_items=2 * entry.batch_size)
        cpu_before = host_cpu_seconds()
        timed = measure(lambda: build(setup), count=count_batch)
        return {"status": "timed", "items": timed.items, "seconds": timed.seconds,
                "cpu_s": host_cpu_seconds() - cpu_before}

    return outcome(entry, run)


def outcome(entry: Entry, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`run()`'s result, or what its failure means for the row: a learner's stub is "not started", a failed gate
    "rejected" (timed all the same, never ranked); anything else raises (the parent reports it as crashed)."""
    try:
        return run()
    except NotImplementedError as err:
        if entry.learner:
            return {"status": "not started", "note": str(err)}
        raise
    except GateFailure as err:
        return {"status": "rejected", "note": str(err), "brief": err.brief}


def crashed(error: BaseException) -> dict[str, Any]:
    """An entry's result when its gate or timed pass raised: the exception, in one short line."""
    return {"status": "crashed", "note": f"{type(error).__name__}: {error}"[:300]}


def _in_child(entry: Entry, setup: Setup, mode: str) -> dict[str, Any]:
    arguments = ["local", entry.name, mode, "--root", str(setup.root), "--shards", str(setup.shards)]
    return sandboxed_child_result(arguments) if entry.sandboxed else child_result(arguments)


def child_result(arguments: list[str]) -> dict[str, Any]:
    """Run `python -m league.child ARGUMENTS` (one entry's gate or timed pass) in a fresh process; its result. Past
    CHILD_TIMEOUT_S it is stopped, with every process it started (`stop_tree`), and reported as crashed."""
    child = subprocess.Popen([sys.executable, "-m", "league.child", *arguments], cwd=REPO_ROOT,
                             env=python_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = child.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop_tree(child, grace_s=0)
        return {"status": "crashed", "note": f"no result within {CHILD_TIMEOUT_S} s"}
    return _read_result(stdout, stderr, child.returncode)


def sandboxed_child_result(arguments: list[str]) -> dict[str, Any]:
    """`child_result` for an entry whose servers bind every interface: the child runs in the course's sandbox, and
    every process it started ends with it. The child's folder (its output, and what its servers write: its path in
    CHILD_FOLDER_VARIABLE) is removed once the sandbox has ended. Its path is short, for the Unix sockets a server makes
    in it (at most 107 bytes on Linux): the Ray Data entry's longest, its object store's, was 98 bytes in /tmp."""
    with tempfile.TemporaryDirectory(prefix="loaderlab-league-child-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        with out.open("wb") as stdout, err.open("wb") as stderr, \
                sandboxed([sys.executable, "-m", "league.child", *arguments], stdout=stdout, stderr=stderr,
                          env={**os.environ, CHILD_FOLDER_VARIABLE: folder}, cwd=REPO_ROOT) as sandbox:
            try:
                returncode = sandbox.process.wait(CHILD_TIMEOUT_S)   # never communicate(): it would close the
            except subprocess.TimeoutExpired:                        # guardian's pipe, which stops the sandbox
                return {"status": "crashed", "note": f"no result within {CHILD_TIMEOUT_S} s"}
        return _read_result(out.read_text(errors="replace"), err.read_text(errors="replace"), returncode)


def _read_result(stdout: str, stderr: str, returncode: int) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    tail = (stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": "crashed", "note": f"exit {returncode}: {tail}"[:300]}


# ---- the league ---------------------------------------------------------------------------------------

@dataclass
class Row:
    name: str
    title: str
    status: str                # ranked, ceiling, rejected, not started, not installed, crashed
    note: str = ""
    brief: str = ""            # a rejected entry's reason in a few words (GateFailure.brief), for the chart
    yours: bool = False        # the learner's exercise (Entry.learner): the playbook highlights it from the JSON
    images_per_s: list[float] = field(default_factory=list)
    cpu_ms_per_image: list[float] = field(default_factory=list)   # the host's CPU per image (`host_cpu_seconds`)

    @property
    def median(self) -> float | None:
        return statistics.median(self.images_per_s) if self.images_per_s else None


def league_samples(profile: str, images: int) -> list[Sample]:
    """`images` samples of the profile's train split, evenly spaced over it (so every class is there), a file of every
    kind among them (`loaderlab.images.spread_samples`)."""
    return spread_samples(list_samples(dataset_dir(profile) / "train"), images,
                          file_encodings(dataset_dir(profile), "train"))


def run_league(profile: str, rounds: int, images: int, names: list[str], log: Callable[[str], None] = print,
               run_entry: Callable[[Entry, Setup, str], dict[str, Any]] = _in_child) -> dict[str, Any]:
    """Gate every entry, then time those that pass over `rounds` interleaved rounds; the league as a dict.

    `run_entry(entry, setup, mode)` runs one gate or timed pass: in a fresh process by default; notebook 08 passes
    `league.notebook.in_this_process` on `ci`, where a process per entry would cost more than the league."""
    entries = [BY_NAME[n] for n in names]
    rows = {e.name: Row(e.name, e.title, "ceiling" if e in CEILINGS else "ranked", yours=e.learner) for e in entries}
    with linked_split(league_samples(profile, images)) as (root, samples), \
            tempfile.TemporaryDirectory(prefix="loaderlab-league-shards-") as shards:
        setup = Setup(root, Path(shards))
        if any(e.reads_shards for e in entries):
            _write_shards(root, setup.shards)
        timed = gate_all(entries, rows, lambda entry: run_entry(entry, setup, "check"), CEILINGS, log)
        for number in range(rounds):
            for entry in rotated(timed, number):
                result = run_entry(entry, setup, "time")
                if result["status"] not in ("timed", "rejected"):
                    rows[entry.name].status, rows[entry.name].note = result["status"], result.get("note", "")
                    continue
                rows[entry.name].images_per_s.append(result["items"] / result["seconds"])
                rows[entry.name].cpu_ms_per_image.append(1000 * result["cpu_s"] / result["items"])
            log(f"  round {number + 1}/{rounds} done")
    ceiling, window_ceiling = (rows[c.name].median if c.name in rows else None for c in CEILINGS)
    return {"profile": profile, "rounds": rounds, "images": len(samples), "batch_size": BATCH,
            "cores": usable_cores(), "date": time.strftime("%Y-%m-%d"), "ceiling": ceiling,
            "window_ceiling": window_ceiling,
            "rows": [asdict(r) | {"median": r.median} for r in rows.values()]}


def gate_all(entries: list[Entry], rows: dict[str, Any], check: Callable[[Entry], dict[str, Any]],
             ceilings: Iterable[Entry], log: Callable[[str], None]) -> list[Entry]:
    """Gate each entry (`check(entry)`, the ceilings excepted), writing the verdicts into `rows`; the entries to time:
    those that passed, the ceilings, and the rejected (timed to be shown beside the ranking, never in it)."""
    timed = []
    for entry in entries:
        row = rows[entry.name]
        if not entry.build or not all(_has_module(name) for name in entry.requires):
            row.status, row.note = "not installed", entry.install
            continue
        if entry.sandboxed and sandbox_unavailable():
            row.status, row.note = "not installed", f"no sandbox here: {sandbox_unavailable()}"
            continue
        if entry not in ceilings:
            verdict = check(entry)
            if verdict["status"] != "passed":
                row.status, row.note, row.brief = verdict["status"], verdict.get("note", ""), verdict.get("brief", "")
                log(f"  {entry.name}: {row.status}: {row.note}")
                if row.status != "rejected":
                    continue
            row.note = "; ".join(filter(None, [entry.note, verdict["note"]]))
        timed.append(entry)
    return timed


def rotated(timed: list[Entry], number: int) -> list[Entry]:
    """Round `number`'s order: the entries rotated by it, so none always runs first."""
    return timed[number % len(timed):] + timed[: number % len(timed)] if timed else []


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _write_shards(root: Path, out_dir: Path) -> None:
    """Module 06's tar shards of the league's images, about 4 per core so every worker has some."""
    samples = list_samples(root)
    write_tar_shards(root, out_dir, max(1, -(-len(samples) // (4 * usable_cores()))), samples)


def table(league: dict[str, Any]) -> str:
    """The league as text: ranked rows by median, then the ceilings, then what was not ranked and why. Each row's
    share of both ceilings: full decode (Pillow) and decode less (the smallest DCT scale that keeps 224 px)."""
    ceilings = (league["ceiling"], league.get("window_ceiling"))
    lines = [f"League on '{league['profile']}': {league['images']} images, {league['rounds']} round(s), "
             f"{league['cores']} usable cores, {league['date']}",
             f"{'entry':<16} {'img/s':>8} {'spread':>13} {'of full':>8} {'of DCT':>7} {'CPU ms/img':>10}  note"]
    rows = league["rows"]
    ranked = sorted((r for r in rows if r["status"] in ("ranked", "ceiling") and r["median"]),
                    key=lambda r: (r["status"] == "ceiling", -r["median"]))

    def shares(median: float) -> str:
        return " ".join(f"{median / c:>{width}.0%}" if c else f"{'-':>{width}}" for c, width in zip(ceilings, (8, 7)))

    for r in ranked:
        lines.append(f"{r['name']:<16} {r['median']:>8.0f} {_spread(r):>13} {shares(r['median'])} {_cpu(r):>10}  "
                     f"{r['title']}" + (f" ({r['note']})" if r["note"] else ""))
    lines.append("not ranked:")
    for r in rows:
        if r not in ranked:
            figures = (f"{r['median']:>8.0f} {_spread(r):>13} {shares(r['median'])} {_cpu(r):>10}" if r["median"]
                       else f"{'-':>8} {'-':>13} {'-':>8} {'-':>7} {'-':>10}")
            lines.append(f"{r['name']:<16} {figures}  {r['status']}: {r['note']}")
    return "\n".join(lines)


def _cpu(row: dict[str, Any]) -> str:
    """The host's CPU milliseconds per image, median over rounds ("-" in a league saved before it was measured)."""
    return f"{statistics.median(row['cpu_ms_per_image']):.2f}" if row.get("cpu_ms_per_image") else "-"


def _spread(row: dict[str, Any]) -> str:
    return f"{min(row['images_per_s']):.0f}-{max(row['images_per_s']):.0f}"


def league_bars(league: dict[str, Any], highlight: Iterable[str] = (), ax: Any = None) -> Any:
    """Horizontal bars of the entries' medians, each labelled with its figure (whiskers: the spread over rounds): the
    ranked ones in blue (those named in `highlight` in orange), then, greyed, the timed entries that were not ranked,
    with the reason; the two ceilings as dashed lines. Returns the axes."""
    import matplotlib.pyplot as plt

    rows = league["rows"]
    ranked = sorted((r for r in rows if r["status"] == "ranked" and r["median"]), key=lambda r: r["median"])
    greyed = [r for r in rows if r["status"] not in ("ranked", "ceiling") and r["median"]]
    shown = greyed + ranked
    if ax is None:
        ax = plt.subplots(figsize=(9, 0.8 + 0.45 * max(1, len(shown))))[1]
    medians = [r["median"] for r in shown]
    low = [m - min(r["images_per_s"]) for m, r in zip(medians, shown)]
    high = [max(r["images_per_s"]) - m for m, r in zip(medians, shown)]
    marked = set(highlight)
    colours = ["#bbbbbb" if r in greyed else "#dd8452" if r["name"] in marked else "#4c72b0" for r in shown]
    ax.barh([r["name"] for r in shown], medians, xerr=[low, high], capsize=3, color=colours)
    for row, r in enumerate(shown):
        reason = f"  not ranked: {_short_reason(r)}" if r in greyed else ""
        ax.text(r["median"], row, f" {r['median']:.0f}{reason}", va="center", fontsize="small",
                color="#777777" if r in greyed else "black")
    limits = ([(league["network_ceiling"], "--", f"network model ({league['network_profile']['name']})"),
               (league["decode_ceiling"], ":", "decode only, full size, local")] if league.get("source") == "s3" else
              [(league["ceiling"], "--", "decode only, full size"),
               (league.get("window_ceiling"), ":", "decode only, smallest DCT scale")])
    ceilings = [(value, style, label) for value, style, label in limits if value]
    for value, style, label in ceilings:
        ax.axvline(value, color="#c44e52", linestyle=style, label=f"{label}: {value:.0f}/s")
    ax.set_xlim(0, 1.6 * max([*medians, *(value for value, _, _ in ceilings)], default=1))  # room for the labels
    if ceilings:
        ax.legend(loc="upper right", fontsize="small")
    ax.set_xlabel("images/s (median over rounds)")
    ax.set_title(f"{league['profile']}, {league['cores']} cores, {league['images']} images x {league['rounds']} round(s)")
    return ax


def _short_reason(row: dict[str, Any]) -> str:
    """A not-ranked row's reason in a few words, for the chart (the table has it whole)."""
    return row.get("brief") or f"{row['status']}: {row['note'][:40]}"
