"""Helpers for the checks (they run in the grading process, next to the learner's code)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
import psutil

from grader import shm_ledger
from loaderlab.images import (CROP, Sample, beyond, far_kind, file_encodings, list_samples, mean_abs_difference,
                              named, reference_crop, spread_samples)
from loaderlab.paths import dataset_dir

T = TypeVar("T")
SHM_DIR = Path("/dev/shm")
# Helper processes that multiprocessing starts once and keeps by design.
SERVICE_PROCESSES = ("resource_tracker", "forkserver")


def require(module: ModuleType, name: str) -> Any:
    """The attribute `name` of the learner's module, or a coaching failure if it is missing."""
    if not hasattr(module, name):
        raise AssertionError(
            f"MISSING: {module.__file__} defines no `{name}`. The grader looks for exactly this name: "
            "did you rename or delete it? (`git diff` on the file shows what changed.)"
        )
    return getattr(module, name)


def within(seconds: float, what: str, function: Callable[[], T]) -> T:
    """Run `function` in a helper thread; fail with a clear message if it takes longer than `seconds`."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as err:  # handed to the caller below
            outcome["error"] = err

    worker = threading.Thread(target=target, name="grader-watchdog", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise AssertionError(f"{what} did not finish within {seconds:.0f} s: something blocks without a timeout.")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _shm_entries() -> set[str]:
    return set(os.listdir(SHM_DIR)) if SHM_DIR.is_dir() else set()


def segments_created_since(before: set[str]) -> set[str]:
    """Shared-memory segments the graded code created after `before` (a `shm_ledger.created()`) that still exist.

    Only segments in the ledger count: another program's segments are never judged, nor touched.
    """
    return (shm_ledger.created() - before) & _shm_entries()


def child_processes() -> list[psutil.Process]:
    children = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.is_running() and not any(s in " ".join(child.cmdline()) for s in SERVICE_PROCESSES):
                children.append(child)
        except psutil.Error:
            continue
    return children


@contextmanager
def no_leaks(what: str, grace_s: float = 3.0, shared_memory: bool = False) -> Iterator[None]:
    """Fail if the block leaves threads or child processes behind, or, with `shared_memory`, segments it created.

    Whatever leaked is waited for up to `grace_s`, then named in the failure (and cleaned up,
    so the grading process itself can end). Shared memory is judged only for exercises that
    create it, and only the segments the graded code created (`grader.shm_ledger`) count.
    """
    threads_before = set(threading.enumerate())
    children_before = {p.pid for p in child_processes()}
    segments_before = shm_ledger.created()
    yield
    deadline = time.monotonic() + grace_s
    problems = []
    for thread in set(threading.enumerate()) - threads_before:
        if thread.name != "grader-watchdog":
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                problems.append(f"thread {thread.name!r} still running")
    for child in child_processes():
        if child.pid in children_before:
            continue
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except psutil.TimeoutExpired:
            problems.append(f"process {child.pid} ({child.name()}) still alive")
            child.kill()
        except psutil.Error:
            pass
    leaked = segments_created_since(segments_before) if shared_memory else set()
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = segments_created_since(segments_before)
    for name in sorted(leaked):
        problems.append(f"shared-memory segment /dev/shm/{name} not unlinked")
        (SHM_DIR / name).unlink(missing_ok=True)  # it is the graded code's own: the ledger says so
    if problems:
        raise AssertionError(f"{what} left things behind {grace_s:.0f} s later: " + "; ".join(problems)
                             + ". close() (and leaving a `with` block) must stop and join every worker and free what it made.")


class PipeTraffic:
    """Bytes this process received through `multiprocessing` connections (Pipe, Queue, SimpleQueue, Pool)."""

    def __init__(self) -> None:
        self.bytes = 0


@contextmanager
def pipe_traffic() -> Iterator[PipeTraffic]:
    """Count the bytes received through multiprocessing connections in this process while the block runs.

    Every standard channel between processes (Pipe, Queue, SimpleQueue, Pool, ProcessPoolExecutor)
    reads through `Connection._recv_bytes`, so pixels pickled back to the parent show up here.
    """
    from multiprocessing import connection

    traffic = PipeTraffic()
    classes = [c for c in (getattr(connection, "Connection", None), getattr(connection, "PipeConnection", None)) if c]
    originals = {cls: cls._recv_bytes for cls in classes}

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def _recv_bytes(self: Any, *args: Any, **kwargs: Any) -> Any:
            buffer = original(self, *args, **kwargs)
            traffic.bytes += buffer.getbuffer().nbytes
            return buffer
        return _recv_bytes

    for cls, original in originals.items():
        cls._recv_bytes = counting(original)
    try:
        yield traffic
    finally:
        for cls, original in originals.items():
            cls._recv_bytes = original


# Where a contract bounds "any image", the pixel check compares this many training images: every one of ci's 200,
# and as many spread evenly over a larger profile (a decode of each, about 2 s on 2 cores).
ANY_IMAGE_SAMPLES = 200


def dataset_samples(split: str, count: int | None = None) -> list[Sample]:
    """`count` samples of a split of the active dataset, spread evenly over its (sorted) files, a file of every kind
    among them from `count` = the number of kinds up (`loaderlab.images.spread_samples`): a sampled check on a large
    profile, where a kind is 1 file in 1,000, meets every kind."""
    samples = list_samples(dataset_dir() / split)
    if count is None or count >= len(samples):
        return samples
    return spread_samples(samples, count, file_encodings(dataset_dir(), split))


def batch_layout(batches: list[tuple[np.ndarray, np.ndarray]], sample_count: int, batch_size: int,
                 setting: str = "") -> tuple[np.ndarray, list[int]]:
    """Check sizes, dtypes and shapes of (uint8 images, int64 labels) batches; return all images and labels.

    Every batch is full except the last, which is kept; images are uint8 (N, 224, 224, 3).
    """
    prefix = f"{setting}: " if setting else ""
    sizes = [len(images) for images, _ in batches]
    expected = [min(batch_size, sample_count - start) for start in range(0, sample_count, batch_size)]
    assert sizes == expected, (
        f"{prefix}batch sizes {sizes}, expected {expected}: every sample once, every batch full except the "
        "last, and the last partial batch kept (dropping it loses samples every epoch).")
    for images, labels in batches:
        assert isinstance(images, np.ndarray) and images.dtype == np.uint8 and images.shape[1:] == (CROP, CROP, 3), (
            f"{prefix}images must be a uint8 numpy array of shape (N, {CROP}, {CROP}, 3), got "
            f"{getattr(images, 'dtype', type(images))} {getattr(images, 'shape', '')}: keep uint8, convert later.")
        assert isinstance(labels, np.ndarray) and labels.dtype == np.int64, (
            f"{prefix}labels must be an int64 numpy array, got {getattr(labels, 'dtype', type(labels))}")
    if not batches:
        return np.empty((0, CROP, CROP, 3), np.uint8), []
    return np.concatenate([images for images, _ in batches]), np.concatenate([labels for _, labels in batches]).tolist()


def assert_near_reference_crops(images: Any, samples: list[Sample], setting: str, mean_tolerance: float,
                                worst_tolerance: float, how: str) -> None:
    """Fail unless the images lie within the tolerances (grey levels, on average and at worst) of their samples'
    reference crops (`loaderlab.images.reference_crop`); the message names the worst file and says `how` to crop."""
    differences = [mean_abs_difference(image, reference_crop(s.path)) for image, s in zip(images, samples)]
    worst = int(np.argmax(differences))
    assert np.mean(differences) <= mean_tolerance and differences[worst] <= worst_tolerance, (
        f"{setting}: pixels differ from the reference crop by {np.mean(differences):.2f} levels on average "
        f"(allowed {mean_tolerance}) and {differences[worst]:.2f} at worst (allowed {worst_tolerance}), worst at "
        f"{named(samples[worst].path)}.{beyond(differences, samples, worst_tolerance)}"
        + ("" if far_kind(differences, samples, worst_tolerance) else f" {how}"))
