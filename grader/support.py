"""Helpers for the checks (they run in the grading process, next to the learner's code)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
import psutil

from grader import shm_ledger
from loaderlab.images import (CROP, Sample, crop_window, far_kind, file_encodings, list_samples,
                              mean_abs_difference, named, reference_crop, spread_samples)
from loaderlab.paths import REPO_ROOT, dataset_dir

T = TypeVar("T")
SHM_DIR = Path("/dev/shm")
# Helper processes that multiprocessing starts once and keeps by design.
SERVICE_PROCESSES = ("resource_tracker", "forkserver")


# Reference crops of earlier checks, by the file's bytes: a grade, and more so `make test` (the solutions, every
# planted folder and alternative), decodes the same few hundred files again in each check's new process. Measured
# (2-core box, ci, the untimed tests of exercises 01, 03, 04 and 06 with their planted folders and alternatives, 153
# tests, 3 at a time): 8,227 reference decodes; 204 CPU-seconds without this cache, 170-174 with it. `make clean`
# removes it (ci: 282 files, 41 MB).
REFERENCE_CACHE = REPO_ROOT / ".grader" / "cache" / "reference-crops"


@functools.cache
def _reference_fingerprint() -> str:
    """What a reference crop depends on beside the file: the reference's code and the decoder's version."""
    import PIL

    images = Path(inspect.getfile(reference_crop)).read_bytes()
    return hashlib.sha1(images + PIL.__version__.encode()).hexdigest()[:16]


def expected_crop(path: Path | str) -> np.ndarray:
    """`loaderlab.images.reference_crop(path)`, kept on disk between checks, for comparing a loader's output with.

    Keyed by the file's bytes and the reference's code, so a file rewritten in place gets its own. A timed baseline
    calls `reference_crop` itself: this is a cache, not a decoder."""
    data = Path(path).read_bytes()
    key = hashlib.sha1(data + _reference_fingerprint().encode()).hexdigest()
    cached = REFERENCE_CACHE / f"{key}.npy"
    try:
        crop = np.load(cached)
        if crop.dtype == np.uint8 and crop.shape == (CROP, CROP, 3):
            return crop
    except (OSError, ValueError):
        pass
    crop = reference_crop(path)
    try:
        REFERENCE_CACHE.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{key}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(partial, "wb") as out:
            np.save(out, crop)
        os.replace(partial, cached)  # whole or not at all, whatever other checks read at the same time
    except OSError:
        pass  # a read-only course still grades, decoding each time
    return crop


class NotGradedHere(Exception):
    """Raised by a check that cannot grade on this machine (no CUDA GPU, say): its message says why and what would
    grade it. The grading child reports the check as skipped, with that message, never as passed."""


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


def raised_by(call: Callable[[], Any]) -> BaseException | None:
    """The exception `call()` raised, or None where it returned: for a check that expects an error. NotImplementedError
    passes through, so that an open TODO reads "not started", not as the error the check expected."""
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as err:
        return err
    return None


def relative_str(path: Path) -> str:
    """`path` in the other form a `Path | str` contract promises: a str, relative to the working directory (the
    absolute str where there is no relative one: on Windows, another drive)."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def in_promised_type(call: Callable[[Any], T], given: Any, usual: Any, what: str, instead: str, promise: str) -> T:
    """`call(given)`, where `given` is an argument in another type its contract promises than `usual`, the one the
    other checks pass. When that raises and `call(usual)` does not, fail saying so: `what` names the call and the type
    given, `instead` the usual type, `promise` what the contract takes. When both raise, the usual one's error is the
    learner's to see, as without this check."""
    try:
        return call(given)
    except (AssertionError, NotImplementedError):
        raise
    except Exception as err:
        call(usual)
        raise AssertionError(f"{what} raised {type(err).__name__}: {err}; {instead} it ran. {promise}") from None


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


def wait_until_children_idle(within_s: float = 3.0, quiet_s: float = 0.1, poll_s: float = 0.02) -> bool:
    """Wait until no child process has run for `quiet_s` (workers blocked waiting for work); False after `within_s`.

    A check that must see what workers do when they run ahead (fill every slot, reuse one too early) waits for this
    instead of sleeping a fixed time: on a busy machine a fixed pause ends before the workers have finished, and the
    defect goes unseen. A child counts as running while its CPU time grows or, except on Windows (where psutil
    reports every process as running), while the system says it is running or runnable."""
    def busy_snapshot() -> tuple[float, bool]:
        cpu, runnable = 0.0, False
        for child in child_processes():
            try:
                times = child.cpu_times()
                cpu += times.user + times.system
                runnable |= os.name != "nt" and child.status() == psutil.STATUS_RUNNING
            except psutil.Error:
                continue
        return cpu, runnable

    deadline = time.monotonic() + within_s
    last_cpu, _ = busy_snapshot()
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(poll_s)
        cpu, runnable = busy_snapshot()
        if runnable or cpu > last_cpu:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return True
        last_cpu = cpu
    return False


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


def header_sizes(samples: list[Sample]) -> list[tuple[int, int]]:
    """Each file's (width, height), from its header (Pillow's lazy open decodes no pixels)."""
    from PIL import Image

    sizes = []
    for sample in samples:
        with Image.open(sample.path) as image:
            sizes.append(image.size)
    return sizes


def any_image_samples(split: str = "train") -> tuple[list[Sample], set[Sample]]:
    """The images a contract's "any image" bound speaks of, in file order, and those of them a mean is taken over.

    On ci, every image of the split (both). On a larger profile, ANY_IMAGE_SAMPLES spread evenly (the mean's) plus
    every image a decode at 1/2 or smaller can reach (a crop window at least 2 x 224 px on a side, from the headers):
    where a decoder that scales by a power of two meets its edge, a sample would miss the few images past the bound,
    and a mean over them would weigh the hardest images most."""
    samples = dataset_samples(split)
    spread = set(dataset_samples(split, ANY_IMAGE_SAMPLES))
    if len(spread) == len(samples):
        return samples, spread
    reachable = []
    for width, height in header_sizes(samples):
        left, top, right, bottom = crop_window(width, height)
        reachable.append(max(right - left, bottom - top) >= 2 * CROP)
    return [s for s, reach in zip(samples, reachable) if reach or s in spread], spread


def assert_pixels_within(differences: list[float], samples: list[Sample], setting: str, worst_tolerance: float,
                         mean_tolerance: float | None = None, how: str = "", averaged: set[Sample] | None = None,
                         reference: str = "the reference crop", note: Callable[[Sample], str] | None = None,
                         shown: int = 5) -> None:
    """Fail unless the images lie within tolerance of their references: `differences` holds each image's mean
    |difference| from its reference (0..255 levels; `loaderlab.images.mean_abs_difference`), `worst_tolerance` bounds
    any one image and `mean_tolerance`, where given, their mean (over `averaged` where given: `any_image_samples`).

    One message form: the mean, over or within what is allowed; the images past the bound for any one image, worst
    first, each named with its kind of file (and `note`, where given) and how far off, or the worst where none is;
    the kind of file they share, where they do; else `how` to make the crop."""
    mean = float(np.mean([d for d, s in zip(differences, samples) if averaged is None or s in averaged]))
    past = sorted((i for i, d in enumerate(differences) if d > worst_tolerance), key=lambda i: -differences[i])
    if not past and (mean_tolerance is None or mean <= mean_tolerance):
        return

    def named_with_note(i: int) -> str:
        return f"{named(samples[i].path)}{', ' + note(samples[i]) if note else ''}: {differences[i]:.2f}"

    on_average = ("" if mean_tolerance is None else f"{mean:.2f} levels on average, over the {mean_tolerance} allowed; "
                  if mean > mean_tolerance else f"{mean:.2f} levels on average (within {mean_tolerance}); ")
    worst = int(np.argmax(differences))
    kind = far_kind(differences, samples, worst_tolerance) if past else None
    images = (f"{len(past)} image{'s are' if len(past) > 1 else ' is'} past the {worst_tolerance} allowed for any one "
              f"image: {'; '.join(named_with_note(i) for i in past[:shown])}{'; ...' if len(past) > shown else ''}"
              if past else f"no image is past {worst_tolerance} (the worst, {named_with_note(worst)})")
    shared = f". Every one of them is of kind {kind}; every file of another kind is within {worst_tolerance}" if kind else ""
    raise AssertionError(f"{setting + ': ' if setting else ''}pixels differ from {reference}"
                         f"{' by ' + on_average if on_average else ': '}{images}{shared}." + (f" {how}" if how and not kind else ""))


def assert_near_reference_crops(images: Any, samples: list[Sample], setting: str, mean_tolerance: float,
                                worst_tolerance: float, how: str, averaged: set[Sample] | None = None) -> None:
    """`assert_pixels_within` for images against their samples' `loaderlab.images.reference_crop`."""
    differences = [mean_abs_difference(image, expected_crop(s.path)) for image, s in zip(images, samples)]
    assert_pixels_within(differences, samples, setting, worst_tolerance, mean_tolerance, how, averaged)


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


# ---- a CUDA code path graded on any machine -------------------------------------------------------------------

COPIES_TO_THE_HOST = ("cpu", "numpy", "tolist", "item")  # tensor methods that bring a device tensor's data back


def tensors_in(value: Any) -> Iterator[Any]:
    """Every tensor in `value` (a tensor, or tuples, lists and dicts of them, nested)."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


class NotFollowed(Exception):
    """The graded code used a part of torch.cuda that exists but that `CudaStandIn` does not follow (its name)."""


class CudaStandIn:
    """CUDA as the learner's code sees it, run on the CPU, for checks that grade a CUDA code path on any machine.

    torch.cuda's streams, events, current_stream, stream(), synchronize and is_available are replaced by stand-ins
    (their waits wait for nothing: nothing runs asynchronously here); a tensor bound for "cuda" stays on the CPU,
    copied as a device copy would be, and is marked as on the device, as is everything computed from it; copying
    such a tensor back to the host (cpu(), numpy(), tolist(), item(), to("cpu")) is recorded in `copied_back`;
    pin_memory() marks its copy as pinned; record_stream takes only a stream. A stand-in's attribute that the real
    class lacks raises AttributeError, as on a GPU; one that the real class has and the stand-in does not follow
    raises NotFollowed. Entered in the thread that runs the code (a torch function mode is per thread); everything
    is put back on leaving. `on_cuda_stand_in` runs code under it and says what its errors mean.
    """

    def __init__(self, ex: ModuleType) -> None:
        import torch
        from torch.overrides import TorchFunctionMode

        self.ex, self.torch = ex, torch
        self.pinned: dict[int, weakref.ref] = {}
        self.on_device: dict[int, weakref.ref] = {}
        self.copied_back: list[str] = []  # how each tensor on the device came back to the host
        stand_in = self

        def missing(kind: str, real: type, name: str) -> None:
            if name.startswith("__") or not hasattr(real, name):
                raise AttributeError(f"'{kind}' object has no attribute {name!r}")
            raise NotFollowed(f"{kind}.{name}")

        class Stream:
            """torch.cuda.Stream on the CPU: nothing runs asynchronously, so its waits wait for nothing."""

            def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
                self.device, self.priority = torch.device("cuda") if device is None else device, priority

            def wait_stream(self, stream: Any) -> None:
                stand_in.expect(stream, Stream, "wait_stream", "a torch.cuda.Stream")

            def wait_event(self, event: Any) -> None:
                stand_in.expect(event, Event, "wait_event", "a torch.cuda.Event")

            def record_event(self, event: Any = None) -> Any:
                event = Event() if event is None else event
                event.record(self)
                return event

            def synchronize(self) -> None:
                pass

            def query(self) -> bool:
                return True

            @property
            def cuda_stream(self) -> int:
                return id(self)

            def __enter__(self) -> Stream:
                stand_in.streams.append(self)
                return self

            def __exit__(self, *exc_info: object) -> None:
                stand_in.streams.pop()

            def __getattr__(self, name: str) -> Any:
                missing("torch.cuda.Stream", stand_in.real["Stream"], name)

        class Event:
            """torch.cuda.Event on the CPU: recorded and waited for at once."""

            def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
                self.enable_timing = enable_timing

            def record(self, stream: Any = None) -> None:
                stand_in.expect(stream, (Stream, type(None)), "Event.record", "a torch.cuda.Stream or None")

            def wait(self, stream: Any = None) -> None:
                stand_in.expect(stream, (Stream, type(None)), "Event.wait", "a torch.cuda.Stream or None")

            def query(self) -> bool:
                return True

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end_event: Any) -> float:
                stand_in.expect(end_event, Event, "Event.elapsed_time", "a torch.cuda.Event")
                return 0.0

            def __getattr__(self, name: str) -> Any:
                missing("torch.cuda.Event", stand_in.real["Event"], name)

        class StreamContext:
            def __init__(self, stream: Any) -> None:
                stand_in.expect(stream, (Stream, type(None)), "torch.cuda.stream", "a torch.cuda.Stream or None")
                self.stream = stream

            def __enter__(self) -> Any:
                stand_in.streams.append(self.stream or stand_in.streams[-1])
                return self.stream

            def __exit__(self, *exc_info: object) -> None:
                stand_in.streams.pop()

        class DeviceContext:
            def __init__(self, device: Any) -> None:
                pass

            def __enter__(self) -> None:
                return None

            def __exit__(self, *exc_info: object) -> None:
                pass

        def current_stream(device: Any = None) -> Stream:
            return stand_in.streams[-1]

        def default_stream(device: Any = None) -> Stream:
            return stand_in.streams[0]

        def set_stream(stream: Any) -> None:
            stand_in.expect(stream, Stream, "torch.cuda.set_stream", "a torch.cuda.Stream")
            stand_in.streams[-1] = stream

        self.streams: list[Stream] = [Stream()]  # the caller's stream first, then any made current
        self.fakes = {"Stream": Stream, "Event": Event, "stream": StreamContext, "device": DeviceContext,
                      "current_stream": current_stream, "default_stream": default_stream, "set_stream": set_stream,
                      "synchronize": lambda device=None: None, "is_available": lambda: True,
                      "device_count": lambda: 1, "current_device": lambda: 0}
        self.real = {name: getattr(torch.cuda, name) for name in self.fakes}

        def record_stream(tensor: Any, stream: Any) -> None:
            stand_in.expect(stream, Stream, "Tensor.record_stream", "a torch.cuda.Stream")

        self.record_stream, self.real_record_stream = record_stream, torch.Tensor.record_stream

        class OnTheCpu(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
                return stand_in.call(func, args, kwargs or {})

        self.mode = OnTheCpu()

    def expect(self, value: Any, kind: type | tuple[type, ...], where: str, what: str) -> None:
        """A TypeError, as torch would raise, when `value` is not what `where` takes."""
        if not isinstance(value, kind):
            raise TypeError(f"{where}() takes {what}, got {type(value).__name__}")

    def _is(self, device: Any, kind: str) -> bool:
        """Whether `device` (a torch.device, a str, or an int as .to() takes one for CUDA) names `kind`."""
        if isinstance(device, self.torch.device):
            return device.type == kind
        if isinstance(device, str):
            return device.split(":")[0] == kind
        return kind == "cuda" and isinstance(device, int) and not isinstance(device, bool)

    @staticmethod
    def _mark(marks: dict[int, weakref.ref], tensor: Any) -> Any:
        marks[id(tensor)] = weakref.ref(tensor)
        return tensor

    @staticmethod
    def _marked(marks: dict[int, weakref.ref], tensor: Any) -> bool:
        entry = marks.get(id(tensor))
        return entry is not None and entry() is tensor

    def mark_pinned(self, tensor: Any) -> Any:
        """`tensor`, from now on pinned as far as is_pinned() says."""
        return self._mark(self.pinned, tensor)

    def is_pinned(self, tensor: Any) -> bool:
        return self._marked(self.pinned, tensor)

    def mark_on_device(self, tensor: Any) -> Any:
        """`tensor`, from now on on the device (and what is computed from it)."""
        return self._mark(self.on_device, tensor)

    def is_on_device(self, tensor: Any) -> bool:
        return self._marked(self.on_device, tensor)

    def call(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """A torch call as it would be made on a GPU, made on the CPU."""
        name = getattr(func, "__name__", "")
        if name == "pin_memory":
            return self.mark_pinned(args[0].clone())
        if name == "is_pinned":
            return self.is_pinned(args[0])
        if name == "cuda":
            return self.mark_on_device(args[0].clone())
        from_device = any(self.is_on_device(t) for t in tensors_in((args, kwargs)))
        to_host = name in COPIES_TO_THE_HOST or self._is(kwargs.get("device"), "cpu") or (
            name == "to" and any(self._is(arg, "cpu") for arg in args[1:]))
        if from_device and to_host:
            self.copied_back.append(f"{name}()")
        pin = bool(kwargs.pop("pin_memory", False))
        moved = self._is(kwargs.get("device"), "cuda")
        if moved:
            kwargs["device"] = "cpu"
        if name == "to":
            for index, arg in enumerate(args[1:], start=1):
                if self._is(arg, "cuda"):
                    args, moved = (*args[:index], "cpu", *args[index + 1:]), True
                    break
        result = func(*args, **kwargs)
        if (moved or (from_device and to_host)) and result is args[0]:
            result = result.clone()  # a copy to the device, or back to the host, is a new tensor
        for tensor in tensors_in(result):
            if pin:
                self.mark_pinned(tensor)
            if moved or (from_device and not to_host):
                self.mark_on_device(tensor)
        return result

    def __enter__(self) -> CudaStandIn:
        import torch

        for name, fake in self.fakes.items():
            setattr(torch.cuda, name, fake)
        named = {id(real): name for name, real in self.real.items()}  # `from torch.cuda import Stream` in the module
        self.rebound = {attr: named[id(value)] for attr, value in vars(self.ex).items() if id(value) in named}
        for attr, name in self.rebound.items():
            setattr(self.ex, attr, self.fakes[name])
        torch.Tensor.record_stream = self.record_stream
        self.mode.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        import torch

        self.mode.__exit__(*exc_info)
        torch.Tensor.record_stream = self.real_record_stream
        for attr, name in self.rebound.items():
            setattr(self.ex, attr, self.real[name])
        for name, real in self.real.items():
            setattr(torch.cuda, name, real)


def _where_in(module: ModuleType, err: BaseException) -> str:
    """' (line N of the learner's file: the line)' for the innermost frame of `err` in `module`'s file."""
    mine = Path(module.__file__).resolve()
    frames = [f for f in traceback.extract_tb(err.__traceback__) if Path(f.filename).resolve() == mine]
    return f" (line {frames[-1].lineno} of {mine.name}: {frames[-1].line})" if frames else ""


def on_cuda_stand_in(ex: ModuleType, setting: str, function: Callable[[CudaStandIn], T],
                     seconds: float = 60) -> tuple[T, CudaStandIn]:
    """Run `function(stand_in)` under a `CudaStandIn` for the learner's module `ex` (within `seconds`): its result and
    the stand-in. A call of something torch lacks, or with what it does not take (AttributeError, NameError,
    ImportError, TypeError), fails with the line; a part of CUDA the stand-in does not follow makes the check
    skipped (NotGradedHere: a GPU grades it); a NotImplementedError (a TODO) goes through."""
    stand_in = CudaStandIn(ex)

    def run() -> T:
        with stand_in:
            return function(stand_in)

    try:
        return within(seconds, setting, run), stand_in
    except NotFollowed as err:
        raise NotGradedHere(
            f"{setting}: your CUDA code uses {err}, which torch has but this CPU stand-in does not follow; it is "
            "graded on a machine with a CUDA GPU") from None
    except (AttributeError, NameError, ImportError, TypeError) as err:
        raise AssertionError(
            f"{setting}: your CUDA code raised {type(err).__name__}: {err}{_where_in(ex, err)}. On a machine with a "
            "GPU that line runs and fails the same way: it calls something torch does not have, or calls it with "
            "what it does not take. torch.cuda.Stream has wait_stream(stream), wait_event(event), record_event(), "
            "synchronize() and query(); torch.cuda.Event has record(stream), wait(stream), synchronize() and "
            "query(); a tensor has pin_memory(), is_pinned() and record_stream(stream).") from None
    except (RuntimeError, AssertionError) as err:
        if "CUDA" not in str(err) and "NVIDIA" not in str(err):
            raise
        raise NotGradedHere(
            f"{setting}: your CUDA code reached a part of CUDA this CPU stand-in does not follow ({err}); it is "
            "graded on a machine with a CUDA GPU") from None
