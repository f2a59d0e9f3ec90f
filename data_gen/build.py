"""Plan the files, render them on a process pool, then write the manifest and dataset.json.

``dataset.json`` is written last and atomically: its presence means the
dataset is complete. A folder without it is a partial build and is rebuilt.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data_gen import CLASSES, PROFILES, default_out_dir
from data_gen.corrupt import KINDS, corrupt_bytes
from data_gen.encodings import BASELINE, assign_kinds
from data_gen.render import encode_image, planned_sizes, render_image

GENERATOR_VERSION = 3
"""Bump when the bytes a seed produces change, so old datasets count as different (2: train and val mix the kinds of
file of data_gen.encodings; 3: a few training images at planned sizes, data_gen.render.PLANNED_SIZES, where the classes are balanced)."""

SPLIT_IDS: dict[str, int] = {"train": 0, "val": 1, "dirty": 2}
KIND_STREAM = 3  # seeds the draw of which train and val files get which kind, apart from every file's own draws
MANIFEST_COLUMNS = ("path", "split", "label", "class_name", "width", "height", "bytes", "sha256", "status", "encoding",
                    "orientation")
DIRTY_OK_PER_BROKEN = 3
ESTIMATED_FILE_BYTES = 130_000 * 1.2
_OWNED = {"train", "val", "dirty", "manifest.csv", "manifest.csv.tmp", "dataset.json", "dataset.json.tmp"}


class DataGenError(Exception):
    """A problem the user can fix (bad option, occupied folder, full disk); the CLI exits 2."""


class WriteError(DataGenError):
    """Writing ``path`` failed with an OSError; picklable, so it crosses the pool."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path, self.reason = path, reason

    def __str__(self) -> str:
        return f"could not write {self.path}: {self.reason}; free some space or choose another --out"


@dataclass(frozen=True)
class Task:
    """One file to write; everything a worker needs, and picklable."""

    out: str
    split: str
    label: int
    index: int
    seed: int
    status: str  # "ok", or the broken-file kind
    size: tuple[int, int] | None = None  # (width, height) planned for this image, else drawn at random
    encoding: str = BASELINE  # how the file is stored (data_gen.encodings); the dirty split's are all baseline
    orientation: int = 0  # the EXIF orientation tag of an "exif-orientation" file, else 0

    @property
    def relpath(self) -> str:
        name = CLASSES[self.label]
        return f"{self.split}/{name}/{name}_{self.index:06d}.jpg"


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build_dataset` found or made; ``built`` is False when nothing had to be done."""

    out: Path
    parameters: dict
    totals: dict
    built: bool


def default_workers() -> int:
    """The CPU cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def train_counts(train_per_class: int, imbalance: float) -> list[int]:
    """Train images per class: geometric in label order, class 0 largest, ``imbalance`` = largest/smallest."""
    last = len(CLASSES) - 1
    return [max(1, round(train_per_class * imbalance ** (-label / last))) for label in range(len(CLASSES))]


def parameters(profile: str, seed: int = 0, corrupt: int | None = None, imbalance: float = 1.0) -> dict:
    """The parameters that decide the dataset's content, as stored in dataset.json."""
    p = PROFILES[profile]
    corrupt = p.corrupt if corrupt is None else corrupt
    per_class = train_counts(p.train_per_class, imbalance)
    return {
        "profile": profile,
        "seed": seed,
        "train_per_class": p.train_per_class,
        "val_per_class": p.val_per_class,
        "corrupt": corrupt,
        "imbalance": float(imbalance),
        "counts": {
            "train": sum(per_class),
            "val": p.val_per_class * len(CLASSES),
            "dirty": corrupt * (DIRTY_OK_PER_BROKEN + 1),
        },
        "train_class_counts": per_class,
        "generator_version": GENERATOR_VERSION,
        "classes": list(CLASSES),
    }


def _dirty_statuses(label: int, corrupt: int) -> list[str]:
    """Statuses of one class's dirty files in file order, broken ones spread evenly among the valid."""
    n = len(CLASSES)
    n_ok = len(range(label, corrupt * DIRTY_OK_PER_BROKEN, n))
    broken = [KINDS[(j + j // n) % len(KINDS)] for j in range(label, corrupt, n)]
    total = n_ok + len(broken)
    statuses = ["ok"] * total
    for k, kind in enumerate(broken):
        statuses[int((k + 0.5) * total / len(broken))] = kind
    return statuses


def plan(out: Path, params: dict) -> list[Task]:
    """Every file of the dataset, in path order; train and val files each of a kind (`data_gen.encodings`)."""
    seed, tasks = params["seed"], []
    for label in range(len(CLASSES)):
        count = params["train_class_counts"][label]
        # Planned sizes only where classes are balanced: a balanced sampler over an imbalanced set would draw a rare
        # class's planned images (up to 2048 px on the short side) ten times as often, and time their decode.
        sizes = planned_sizes(label, count) if params["imbalance"] == 1 else {}
        tasks += [Task(str(out), "train", label, i, seed, "ok", sizes.get(i)) for i in range(count)]
        tasks += [Task(str(out), "val", label, i, seed, "ok") for i in range(params["val_per_class"])]
        statuses = _dirty_statuses(label, params["corrupt"])
        tasks += [Task(str(out), "dirty", label, i, seed, s) for i, s in enumerate(statuses)]
    tasks.sort(key=lambda t: t.relpath)
    for split in ("train", "val"):
        places = [n for n, task in enumerate(tasks) if task.split == split]
        kinds = assign_kinds(len(places), np.random.default_rng([seed, SPLIT_IDS[split], KIND_STREAM]))
        for n, (encoding, orientation) in zip(places, kinds):
            tasks[n] = dataclasses.replace(tasks[n], encoding=encoding, orientation=orientation)
    return tasks


def _write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary name beside ``path``, then rename: never a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        raise WriteError(str(path), e.strerror or str(e)) from None


def make_file(task: Task) -> dict:
    """Render, encode (and maybe break) one file, write it, and return its manifest row.

    The random generator is seeded from (seed, split, label, index) alone, so
    the bytes do not depend on the number of workers or their order.
    """
    rng = np.random.default_rng([task.seed, SPLIT_IDS[task.split], task.label, task.index])
    data, (width, height) = encode_image(rng, render_image(rng, task.label, task.size), task.encoding, task.orientation)
    if task.status != "ok":
        data = corrupt_bytes(task.status, rng, data)
        width = height = 0
    _write_atomic(Path(task.out) / task.relpath, data)
    return {
        "path": task.relpath,
        "split": task.split,
        "label": task.label,
        "class_name": CLASSES[task.label],
        "width": width,
        "height": height,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "status": task.status,
        "encoding": task.encoding,
        "orientation": task.orientation,
    }


def _run(tasks: list[Task], workers: int) -> list[dict]:
    """Make every file on ``workers`` processes, with a progress bar on stderr."""
    bar = tqdm(total=len(tasks), unit="img", mininterval=1, desc="data_gen")
    rows = []
    with bar:
        if workers == 1:
            for task in tasks:
                rows.append(make_file(task))
                bar.update()
        else:
            chunksize = max(1, min(32, len(tasks) // (workers * 8)))
            with multiprocessing.Pool(workers) as pool:
                for row in pool.imap_unordered(make_file, tasks, chunksize=chunksize):
                    rows.append(row)
                    bar.update()
    return sorted(rows, key=lambda r: r["path"])


def _totals(rows: list[dict], seconds: float, workers: int) -> dict:
    ok = [r for r in rows if r["status"] == "ok"]
    return {
        "files": len(rows),
        "files_per_split": {s: sum(r["split"] == s for r in rows) for s in SPLIT_IDS},
        "files_per_encoding": dict(sorted(Counter(r["encoding"] for r in rows if r["split"] != "dirty").items())),
        "broken": len(rows) - len(ok),
        "bytes": sum(r["bytes"] for r in rows),
        "mean_kb": round(float(np.mean([r["bytes"] for r in ok])) / 1000, 1),
        "mean_width": round(float(np.mean([r["width"] for r in ok])), 1),
        "mean_height": round(float(np.mean([r["height"] for r in ok])), 1),
        "mean_short_side": round(float(np.mean([min(r["width"], r["height"]) for r in ok])), 1),
        "seconds": round(seconds, 1),
        "workers": workers,
    }


def _write_manifest(out: Path, rows: list[dict]) -> None:
    tmp = out / "manifest.csv.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=MANIFEST_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, out / "manifest.csv")


def _write_json_atomic(path: Path, obj: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_manifest(out: Path) -> list[dict]:
    """The manifest rows of a dataset, with label/width/height/bytes/orientation as ints."""
    with open(Path(out) / "manifest.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for key in ("label", "width", "height", "bytes", "orientation"):
            r[key] = int(r[key])
    return rows


def _read_complete(out: Path) -> dict | None:
    """The dataset.json of a complete dataset at ``out``, or None."""
    try:
        return json.loads((out / "dataset.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _check_options(profile: str, seed: int, corrupt: int | None, imbalance: float, workers: int) -> None:
    if profile not in PROFILES:
        raise DataGenError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if seed < 0:
        raise DataGenError(f"--seed must be 0 or more, got {seed}")
    if corrupt is not None and corrupt < 0:
        raise DataGenError(f"--corrupt must be 0 or more, got {corrupt}")
    if not imbalance >= 1:
        raise DataGenError(f"--imbalance must be 1 or more (largest class / smallest class), got {imbalance}")
    if workers < 1:
        raise DataGenError(f"--workers must be 1 or more, got {workers}")


def _clear(out: Path, log: Callable[[str], None], reason: str) -> None:
    """Remove a previous (partial or replaced) build from ``out``, refusing if it holds foreign files."""
    entries = sorted(p.name for p in out.iterdir())
    foreign = [name for name in entries if name not in _OWNED]
    if foreign:
        raise DataGenError(
            f"{out} is not empty and holds files data_gen did not write ({', '.join(foreign[:5])}); "
            "choose another --out"
        )
    if not entries:
        return
    log(f"{reason}: removing it and rebuilding.")
    (out / "dataset.json").unlink(missing_ok=True)  # first, so an interrupted removal never looks complete
    for name in entries:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _check_space(out: Path, n_files: int) -> None:
    existing = out
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    need = n_files * ESTIMATED_FILE_BYTES
    if free < need:
        raise DataGenError(
            f"not enough free space for {out}: about {need / 1e9:.2f} GB needed, {free / 1e9:.2f} GB free; "
            "free some space or choose another --out"
        )


def build_dataset(
    profile: str,
    out: Path | str | None = None,
    seed: int = 0,
    corrupt: int | None = None,
    imbalance: float = 1.0,
    workers: int | None = None,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> BuildResult:
    """Make the dataset at ``out`` (default :func:`data_gen.default_out_dir`) unless it is already there.

    ``corrupt`` defaults to the profile's. Raises :class:`DataGenError` (and
    writes no dataset.json) for bad options, a folder holding a dataset with
    other parameters (unless ``force``), too little space or a failed write.
    """
    workers = default_workers() if workers is None else workers
    _check_options(profile, seed, corrupt, imbalance, workers)
    out = Path(out) if out is not None else default_out_dir(profile, imbalance)
    params = parameters(profile, seed, corrupt, imbalance)
    if out.exists() and not out.is_dir():
        raise DataGenError(f"--out {out} is an existing file, not a folder; choose another --out")

    existing = _read_complete(out)
    if existing is not None and not force:
        if existing.get("parameters") == params:
            n = existing.get("totals", {}).get("files", "?")
            log(f"Dataset already complete at {out} ({n} images); nothing to do.")
            return BuildResult(out, params, existing.get("totals", {}), built=False)
        old = existing.get("parameters") or {}
        keys = ["profile"] + [k for k in params if k != "profile" and old.get(k) != params[k]]
        raise DataGenError(
            f"{out} already holds a dataset with other parameters:\n"
            f"  existing:  {json.dumps({k: old.get(k) for k in keys})}\n"
            f"  requested: {json.dumps({k: params[k] for k in keys})}\n"
            "Use another --out, or --force to delete it and rebuild."
        )

    try:
        if out.is_dir():
            _clear(out, log, f"--force: {out} holds a dataset" if existing else f"{out} holds a partial dataset (no dataset.json)")
        tasks = plan(out, params)
        _check_space(out, len(tasks))
        for split in SPLIT_IDS:
            if params["counts"][split]:
                for name in CLASSES:
                    (out / split / name).mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        rows = _run(tasks, workers)
        totals = _totals(rows, time.perf_counter() - start, workers)
        _write_manifest(out, rows)
        _write_json_atomic(out / "dataset.json", {"parameters": params, "totals": totals})
    except OSError as e:
        raise WriteError(str(e.filename or out), e.strerror or str(e)) from None
    return BuildResult(out, params, totals, built=True)
