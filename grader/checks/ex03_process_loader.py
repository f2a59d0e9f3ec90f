"""Checks for exercise 03 (processes), in the graded steps of the exercise:
1 batches in order, 2 shared-memory hand-over, 3 seeding, 4 errors and deaths, 5 clean shutdown, 6 speed.

The transforms used here are top-level functions of this module (or partials of them), so that
spawn-started workers can unpickle them. Steps 1, 2, 4 and 5 use deterministic transforms, so
that a loader is judged on what its step asks, not on the seeding of step 3."""

from __future__ import annotations

import hashlib
import inspect
import mmap
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from grader import shm_ledger
from grader.support import (SHM_DIR, batch_layout, child_processes, dataset_samples, expected_crop, no_leaks,
                            pipe_traffic, require, wait_until_children_idle, within)
from loaderlab.baselines import naive_pool_batches
from loaderlab.bench import Comparison, compare, count_batch
from loaderlab.images import CROP, Sample
from loaderlab.machine import usable_cores
from loaderlab.sim import gil_bound_transform

# What these checks and the exercise import: a waiting grading process imports it once (grader.preload).
PRELOAD = ("numpy", "PIL.Image")

SEED = 1234
IMAGE_BYTES = CROP * CROP * 3
GIL_ITERATIONS = 150_000   # one pass of gil_bound_transform: about 11 ms of pure Python per image
GIL_REPEATS = 3            # three passes: the transform dominates the 5 ms decode
GIL_SAMPLES = 96           # enough work per epoch that starting workers (about 0.2 s under spawn) stays small
# target = 1 + GIL_TARGET_SHARE x (ceiling - 1), where the ceiling is what this machine gives this very transform in
# the same rounds: a plain multiprocessing pool of `cores` processes (the start method the loader gets) against this
# process alone, over the same images (`_plain_pool`). The cores a spinning loop finds free (loaderlab.machine.
# free_cores) overstate it where cores share a physical core, memory or a hypervisor: on the 2-core development
# machine 2.0 were free while the transform got 1.74-1.89x from the pool and the solution 1.42-1.51x (the earlier
# rule's 1.40x target failed it in a fresh clone's run). Measured under fork, ci, 7 December: the solution 1.51x against a
# ceiling of 1.85 idle, 1.11x against 1.36 with two busy loops beside it (a third such run found a ceiling under
# GIL_CEILING_TO_TIME and skipped); the planted single worker 0.80x (ceiling 1.89) idle and 0.76x busy. A share of
# 0.15 asks 1.13x idle and 1.05x in the busy run: the solution passes both, anything that runs the transform in one
# process fails.
GIL_TARGET_SHARE = 0.15
GIL_CEILING_TO_TIME = 1.15  # below it, parallel and single cannot be told apart: the timing is skipped, saying why
POOL_SAMPLES = 192
# uint8 through shared memory vs Pool.map of float32 (loaderlab.baselines.naive_pool_batches), 2 cores, 192 images:
# the solution measured 2.05x under fork and 1.54-1.76x under spawn (ci and workshop), and 1.60-1.81x with one busy
# program beside it (1.0-1.2 cores free, 3 runs); a planted Pool.map of float32 dressed as ProcessLoader 0.99-1.02x.
# (With 128 images: 1.84-2.63x, planted 1.12-1.28x.) The gain is mostly the float32 pickling avoided, not the cores,
# so the target is a flat 1.3x (scaling it by free cores, the first rule, let the planted pool pass at 1.5 free).
POOL_TARGET = 1.3

# Step 2: what the parent may receive through multiprocessing pipes and queues, as a share of the pixel bytes.
# Measured (ci, 18 images, fork and spawn alike): the solution receives 1,086 bytes for 2.7 MB of pixels (0.04%),
# the ProcessPoolExecutor alternative 1,626 bytes (0.06%); the planted loader that pickles pixels as well, 100%.
PIPE_SHARE_LIMIT = 0.05
# Step 1: how long a slow consumer waits, at most, after each batch for the workers to finish all they were given.
SLOW_CONSUMER_WAIT_S = 3.0
# Step 4: timeout_s. A slow but steady epoch that lasts longer than its timeout_s in all (measured on ci: 5.2 s, with
# batches at most 0.52 s apart, the first 0.54 s after start, for the solution and the alternative alike), and a
# worker stuck on one sample for STUCK_SLEEP_S while the loader's timeout_s is STUCK_TIMEOUT_S.
STEADY_SAMPLES, STEADY_SLEEP_S, STEADY_TIMEOUT_S = 40, 0.25, 3.0
STUCK_SLEEP_S, STUCK_TIMEOUT_S = 12.0, 2.0
START_SLACK_S = 8.0        # starting the workers (spawn, a busy machine) and the batches before the stuck one
# Step 5: a worker busy for BUSY_S on one sample; close() must return well within CLOSE_LIMIT_S.
BUSY_S, CLOSE_LIMIT_S = 120.0, 10.0
# Words that say a worker died, in the learner's message or the standard library's
# (concurrent.futures' BrokenProcessPool: "A process in the process pool was terminated abruptly ...").
DEATH_WORDS = ("died", "dead", "killed", "terminated", "abrupt", "exit", "signal", "sigkill", "-9", "broken", "crash")


# ---- transforms the checks hand to the loader ----------------------------------------

def _invert(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A deterministic transform (it ignores `rng`): the negative image."""
    return 255 - image


def _stamp_draws(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Writes 8 random pixels from `rng` into row 0, so the check can read each sample's draw."""
    out = image.copy()
    out[0, :8] = rng.integers(0, 256, size=(8, 3), dtype=np.uint8)
    return out


def _stamp_pid(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Writes the process id into the first pixels, so the check can see where the work ran."""
    time.sleep(0.01)
    out = image.copy()
    out[0, 0:2] = np.frombuffer(os.getpid().to_bytes(6, "little"), np.uint8).reshape(2, 3)
    return out


def _digest(image: np.ndarray) -> str:
    return hashlib.md5(np.ascontiguousarray(image).tobytes()).hexdigest()


def _fail_on(image: np.ndarray, rng: np.random.Generator, *, digest: str) -> np.ndarray:
    if _digest(image) == digest:
        raise ValueError(f"planted failure in the transform (image {digest[:8]})")
    return _invert(image, rng)


def _die_on(image: np.ndarray, rng: np.random.Generator, *, digest: str) -> np.ndarray:
    if _digest(image) == digest:
        os.kill(os.getpid(), signal.SIGKILL)
    return _invert(image, rng)


def _sleep_on(image: np.ndarray, rng: np.random.Generator, *, seconds: float, digest: str | None = None) -> np.ndarray:
    """Sleeps `seconds` on the image with `digest` (on every image if None): a slow read, or a stuck one."""
    if digest is None or _digest(image) == digest:
        time.sleep(seconds)
    return _invert(image, rng)


def _as_is(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """No augmentation: the loader's own cost (decode, crop, hand-over) is what is timed."""
    return image


def _gil_heavy(image: np.ndarray, rng: np.random.Generator, *, iterations: int, repeats: int) -> np.ndarray:
    for _ in range(repeats):
        image = gil_bound_transform(image, iterations)
    return image


# ---- graded steps: a later step reads "not started" while its TODO is untouched -----------

# The helper each step of the stub asks for, and harmless arguments to call it with. A module
# that has no such helper (another design) is simply graded; one whose helper still raises
# NotImplementedError has not started that step.
STEP_TODOS: dict[int, tuple[str, Callable[[], tuple[Any, ...]]]] = {
    2: ("slot_array", lambda: (bytearray(IMAGE_BYTES), 1)),
    3: ("sample_rng", lambda: (SEED, 0, 0)),
    4: ("describe_exit", lambda: (-9,)),
    5: ("stop_processes", lambda: ([], 1.0)),
}


def _untouched_todo(ex: ModuleType, number: int) -> None:
    """Raise the step's NotImplementedError if its helper in the learner's module is still the stub's."""
    name, arguments = STEP_TODOS[number]
    helper = getattr(ex, name, None)
    if not callable(helper):
        return
    try:
        helper(*arguments())
    except NotImplementedError:
        raise
    except Exception:  # another signature, another design: not ours to judge here
        return


def before_step(ex: ModuleType, number: int) -> None:
    """Called by the grader before each check of step `number` (its `@pytest.mark.step`): a check reads "not
    started" while that step's TODO is untouched."""
    if number in STEP_TODOS:
        _untouched_todo(ex, number)


# ---- helpers ----------------------------------------------------------------------------

def _expected(samples: list[Sample], transform, seed: int = SEED, epoch: int = 0) -> list[np.ndarray]:
    """The sequential reference: sample i transformed with default_rng([seed, epoch, i])."""
    return [transform(expected_crop(s.path), np.random.default_rng([seed, epoch, i])) for i, s in enumerate(samples)]


def _batch_digest(batch: Any) -> str | None:
    try:
        images, labels = batch
        return _digest(np.asarray(images)) + _digest(np.asarray(labels))
    except Exception:  # not a pair of arrays: batch_layout says what is wrong with it
        return None


def _unmapped(array: Any) -> bool:
    """Whether `array` is a view into a memory map that is closed now: reading it would crash this process."""
    base, hops = array, 0
    while base is not None and hops < 64:
        if isinstance(base, mmap.mmap):
            return base.closed
        if isinstance(base, memoryview):
            try:
                base = base.obj
            except ValueError:  # a released memoryview
                return True
        else:
            base = getattr(base, "base", None)
        hops += 1
    return False


class _Returned:
    """The batches next() returned, each with a digest taken the moment it was returned."""

    def __init__(self) -> None:
        self.batches: list = []
        self.digests: list[str | None] = []

    def add(self, batch: Any) -> None:
        self.batches.append(batch)
        self.digests.append(_batch_digest(batch))

    def unchanged(self, when: str) -> None:
        """Every batch returned so far is as it was when returned (checked without reading a dangling view)."""
        for index, (batch, digest) in enumerate(zip(self.batches, self.digests)):
            if isinstance(batch, (tuple, list)) and batch and _unmapped(batch[0]):
                raise AssertionError(
                    f"batch {index} still points into a shared-memory segment that was closed ({when}): reading it "
                    "now would crash the program (SIGSEGV). A returned batch belongs to the caller: copy the pixels "
                    "out of their slot before you return them, and never hand out a view into a slot.")
            if _batch_digest(batch) != digest:
                raise AssertionError(
                    f"batch {index} changed after next() returned it ({when}): the array you returned is a view into "
                    "memory the loader reuses, such as a shared-memory slot that a later batch overwrote. A returned "
                    "batch belongs to the caller: copy the pixels out of their slot before the slot takes another batch.")


def _consume(iterator: Any, returned: _Returned, slow: bool = False) -> None:
    """Every batch of `iterator`; before each next(), the batches returned so far must be unchanged
    (checked before the loader closes itself at the end, while their memory is still there). A `slow` consumer
    waits after each batch until the workers have done all they were given: they run ahead and fill every slot,
    so two batches in flight that share a slot are seen on any machine, however busy."""
    while True:
        returned.unchanged("while the epoch went on")
        try:
            batch = next(iterator)
        except StopIteration:
            return
        returned.add(batch)
        if slow:
            wait_until_children_idle(within_s=SLOW_CONSUMER_WAIT_S)


def _load(ex: ModuleType, samples: list[Sample], transform, batch_size: int, num_workers: int,
          what: str, seconds: float = 60, slow: bool = False, **kwargs) -> list[tuple[np.ndarray, np.ndarray]]:
    """One epoch in a `with` block; fails if a batch changes after it was returned."""
    loader = require(ex, "ProcessLoader")

    def run() -> list[tuple[np.ndarray, np.ndarray]]:
        returned = _Returned()
        try:
            with loader(samples, transform, batch_size, num_workers, SEED, **kwargs) as iterator:
                _consume(iterator, returned, slow)
        except BufferError as err:
            raise AssertionError(
                f"closing the loader raised BufferError ({err}): a batch you returned still points into a "
                "shared-memory segment, so the segment cannot be closed. Copy each batch out of its slot "
                "before you return it.") from None
        returned.unchanged("after the loader was closed")
        return returned.batches

    return within(seconds, what, run)


def _check_batches(batches, samples: list[Sample], expected: list[np.ndarray], batch_size: int, setting: str) -> None:
    images, labels = batch_layout(batches, len(samples), batch_size, setting)
    wrong = [i for i, (got, want) in enumerate(zip(images, expected)) if not np.array_equal(got, want)]
    if wrong:
        moved = next((j for j, want in enumerate(expected) if np.array_equal(images[wrong[0]], want)), None)
        where = (f"the image at position {wrong[0]} is sample {moved}'s: results come back out of order. "
                 "Yield batches in sample order, keeping batches that finish early aside until their turn"
                 if moved is not None else
                 f"the image at position {wrong[0]} matches no sample's expected output. Sample i must be "
                 "transform(reference_crop(samples[i].path), rng), and no two batches in flight may share a slot")
        raise AssertionError(f"{setting}: {len(wrong)} of {len(samples)} images differ from the sequential "
                             f"reference (pixels must be equal exactly); {where}.")
    assert labels == [s.label for s in samples], f"{setting}: labels are not the samples' labels in sample order"


def _check_before_failure(received: list, samples: list[Sample], expected: list[np.ndarray], batch_size: int,
                          failing_sample: int, what: str) -> None:
    """The batches returned before an error or a death: right, in order, none at or after the failing batch."""
    failing_batch = failing_sample // batch_size
    assert len(received) <= failing_batch, (
        f"{len(received)} batches were returned before {what}, but sample {failing_sample} is in batch "
        f"{failing_batch}: no batch at or after the failing one may be returned (the epoch would silently skip it).")
    count = sum(len(images) for images, _ in received)
    if received:
        _check_batches(received, samples[:count], expected[:count], batch_size,
                       f"the {len(received)} batches returned before {what}")


# ---- step 1: batches in order -------------------------------------------------------------

def batches_match_sequential_reference(ex: ModuleType) -> None:
    samples = dataset_samples("train", 23)
    with no_leaks("ProcessLoader", shared_memory=True):
        batches = _load(ex, samples, _invert, 4, 2, "ProcessLoader over 23 samples")
    _check_batches(batches, samples, _expected(samples, _invert), 4, "num_workers=2, batch_size=4")


def same_batches_for_any_worker_count(ex: ModuleType) -> None:
    samples = dataset_samples("train", 30)
    expected = _expected(samples, _invert)
    for workers in (1, 2, 3):
        with no_leaks(f"ProcessLoader(num_workers={workers})", shared_memory=True):
            batches = _load(ex, samples, _invert, 3, workers, f"ProcessLoader(num_workers={workers})")
        _check_batches(batches, samples, expected, 3, f"num_workers={workers}")


# (sample count, batch_size, num_workers, prefetch, a slow consumer: after each batch it waits for idle workers)
ARGUMENT_EDGES = [
    (7, 1, 2, 1, False),    # batch_size=1, prefetch=1
    (26, 3, 2, 3, True),    # a batch size that does not divide the sample count; prefetch=3, a slow consumer
    (5, 5, 2, 2, False),    # one batch as large as the epoch, more workers than batches
    (6, 8, 3, 1, False),    # batch_size larger than the epoch
    (9, 4, 4, 4, True),     # more workers (4) than batches (3), prefetch=4
]


def every_argument_at_every_value(ex: ModuleType) -> None:
    pool = dataset_samples("train", 26)
    for count, batch_size, workers, prefetch, slow in ARGUMENT_EDGES:
        samples = pool[:count]
        setting = (f"ProcessLoader(<{count} samples>, batch_size={batch_size}, num_workers={workers}, "
                   f"prefetch={prefetch})")
        with no_leaks(setting, shared_memory=True):
            try:
                batches = _load(ex, samples, _invert, batch_size, workers, setting, slow=slow,
                                prefetch=prefetch)
            except (AssertionError, NotImplementedError):
                raise
            except Exception as err:
                raise AssertionError(
                    f"{setting} raised {type(err).__name__}: {err}. Every argument must work at every valid value, "
                    "not only at the values the examples use: count batches from the epoch, never from num_workers "
                    "or prefetch, and hand out only batches that exist.") from None
        _check_batches(batches, samples, _expected(samples, _invert), batch_size,
                       f"{setting} (every argument must work at every valid value)")


def work_runs_in_worker_processes(ex: ModuleType) -> None:
    samples = dataset_samples("train", 18)
    with no_leaks("ProcessLoader", shared_memory=True):
        batches = _load(ex, samples, _stamp_pid, 3, 3, "ProcessLoader(num_workers=3)")
    pids = {int.from_bytes(image[0, 0:2].tobytes(), "little") for images, _ in batches for image in images}
    assert os.getpid() not in pids, (
        "the transform ran in the parent process: the work must run in the worker processes "
        "(multiprocessing.get_context(start_method).Process), or the GIL serialises it again.")
    assert len(pids) >= 2, (
        f"with num_workers=3, all samples were transformed in {len(pids)} process: hand batches to every "
        "worker (round-robin, or a shared task queue), not all to one.")


def works_under_spawn(ex: ModuleType) -> None:
    samples = dataset_samples("train", 14)
    afresh = ("workers import your module afresh: the worker function and everything it uses must be top-level, "
              "passed to the worker or importable, nothing set up only in the parent")
    with no_leaks('ProcessLoader(start_method="spawn")', shared_memory=True):
        try:
            batches = _load(ex, samples, _invert, 4, 2, 'ProcessLoader(start_method="spawn")', 90,
                            start_method="spawn")
        except (AssertionError, NotImplementedError):
            raise
        except Exception as err:
            raise AssertionError(f'under start_method="spawn" your loader raised {type(err).__name__}: {err}. Under '
                                 f"spawn, {afresh}.") from None
    _check_batches(batches, samples, _expected(samples, _invert), 4, f'start_method="spawn" ({afresh})')


# ---- step 2: shared-memory hand-over ------------------------------------------------------

def pixels_travel_through_shared_memory(ex: ModuleType) -> None:
    loader = require(ex, "ProcessLoader")
    samples = dataset_samples("train", 18)
    segments_while_running: set[str] = set()

    def run() -> tuple[list, int]:
        before = shm_ledger.created()
        returned = _Returned()
        with pipe_traffic() as traffic:
            with loader(samples, _invert, 3, 2, SEED) as iterator:
                while True:
                    returned.unchanged("while the epoch went on")
                    segments_while_running.update(shm_ledger.created() - before)
                    batch = next(iterator, None)
                    if batch is None:
                        break
                    returned.add(batch)
        returned.unchanged("after the loader was closed")
        return returned.batches, traffic.bytes

    with no_leaks("ProcessLoader", shared_memory=True):
        batches, received = within(60, "ProcessLoader(num_workers=2)", run)
    pixel_bytes = len(samples) * IMAGE_BYTES
    assert received <= PIPE_SHARE_LIMIT * pixel_bytes, (
        f"the parent received {received / 1e6:.2f} MB through multiprocessing pipes and queues for "
        f"{pixel_bytes / 1e6:.2f} MB of pixels ({received / pixel_bytes:.0%}): the pixels still travel pickled, "
        "whatever segments exist. Workers write the pixels into a shared-memory slot and send back only the batch "
        "number and labels; the parent reads the pixels from the slot.")
    if SHM_DIR.is_dir():
        assert segments_while_running, (
            "your loader created no shared-memory segment while it ran: hand pixels over through "
            "multiprocessing.shared_memory.SharedMemory, not by pickling arrays through a queue.")
    _check_batches(batches, samples, _expected(samples, _invert), 3, "num_workers=2, batch_size=3")


def returned_batches_stay_unchanged(ex: ModuleType) -> None:
    samples = dataset_samples("train", 36)
    with no_leaks("ProcessLoader", shared_memory=True):
        batches = _load(ex, samples, _invert, 3, 2, "ProcessLoader over 12 batches", prefetch=2)
    _check_batches(batches, samples, _expected(samples, _invert), 3, "12 batches kept by the caller")


def two_loaders_at_once(ex: ModuleType) -> None:
    loader = require(ex, "ProcessLoader")
    pool = dataset_samples("train", 22)
    first, second = pool[:12], pool[12:]
    returned = {"first": _Returned(), "second": _Returned()}

    def take(name: str, iterator: Any) -> bool:
        for other in returned.values():
            other.unchanged("while two loaders ran")
        batch = next(iterator, None)
        if batch is not None:
            returned[name].add(batch)
        return batch is not None

    def interleaved() -> None:
        with loader(first, _invert, 3, 2, SEED) as a:
            take("first", a)
            try:
                b = loader(second, _as_is, 4, 2, SEED)
            except NotImplementedError:
                raise
            except Exception as err:
                raise AssertionError(
                    f"a second ProcessLoader could not start while the first was alive: {type(err).__name__}: "
                    f"{err}. A train and a validation loader live at once: never give segments (or anything else "
                    "global) fixed names; let SharedMemory(create=True) choose unique names.") from None
            with b:
                running = {"second": b, "first": a}
                while running:
                    for name, iterator in list(running.items()):
                        if not take(name, iterator):
                            del running[name]
        for batches in returned.values():
            batches.unchanged("after both loaders were closed")

    with no_leaks("two ProcessLoaders at once", shared_memory=True):
        within(60, "two ProcessLoaders iterated in turn", interleaved)
    for name, samples, transform, batch_size in [("first", first, _invert, 3), ("second", second, _as_is, 4)]:
        _check_batches(returned[name].batches, samples, _expected(samples, transform), batch_size,
                       f"two loaders iterated in turn, the {name} loader (if it holds the other's pixels, the two "
                       "share a segment name, a queue or a module-level variable)")


# ---- step 3: seeding ------------------------------------------------------------------------

def _draws(seed_for: Callable[[int], Any], count: int) -> list[bytes]:
    """The stamps `_stamp_draws` leaves when sample i's generator is default_rng(seed_for(i))."""
    return [np.random.default_rng(seed_for(i)).integers(0, 256, size=(8, 3), dtype=np.uint8).tobytes()
            for i in range(count)]


def _wrong_seeding(stamps: list[bytes], epoch: int) -> str:
    """What the learner's draws follow, where it is a common wrong rule ('' if none of those)."""
    count = len(stamps)
    rules = {
        "np.random.default_rng([seed, i]): the epoch is missing, so every epoch repeats the same augmentations":
            lambda i: [SEED, i],
        "np.random.default_rng([seed, i, epoch]): the contract's order is [seed, epoch, i]":
            lambda i: [SEED, i, epoch],
        "np.random.default_rng(seed + i): neighbouring seeds overlap across epochs and runs": lambda i: SEED + i,
        "np.random.default_rng(seed + epoch + i): seed, epoch and index are mixed by a sum, so they collide":
            lambda i: SEED + epoch + i,
    }
    for name, seed_for in rules.items():
        if stamps == _draws(seed_for, count):
            return f" Your draws follow {name}."
    return ""


def _stamps(ex: ModuleType, samples: list[Sample], workers: int, what: str, **kwargs) -> list[bytes]:
    with no_leaks(what, shared_memory=True):
        batches = _load(ex, samples, _stamp_draws, 3, workers, what, **kwargs)
    batch_layout(batches, len(samples), 3, what)
    return [image[0, :8].tobytes() for images, _ in batches for image in images]


def _require_the_rule(stamps: list[bytes], epoch: int, what: str) -> None:
    assert stamps == _draws(lambda i: [SEED, epoch, i], len(stamps)), (
        f"{what}: each sample's random draw must come from np.random.default_rng([seed, epoch, sample_index]), so that "
        "an epoch is reproducible whatever num_workers is, and every epoch differs; the draws differ from that rule."
        + _wrong_seeding(stamps, epoch))


def _takes_epoch(ex: ModuleType) -> None:
    try:
        parameters = inspect.signature(require(ex, "ProcessLoader")).parameters
    except (TypeError, ValueError):
        return
    assert "epoch" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values()), (
        "ProcessLoader takes no `epoch` argument: add the keyword argument `epoch: int = 0` and give sample i of "
        "that epoch np.random.default_rng([seed, epoch, i]), so that each epoch gets fresh augmentations.")


def augmentations_differ_between_samples(ex: ModuleType) -> None:
    samples = dataset_samples("train", 24)
    stamps = _stamps(ex, samples, 3, "ProcessLoader(num_workers=3) with a random transform")
    first_seen: dict[bytes, int] = {}
    for index, stamp in enumerate(stamps):
        if stamp in first_seen:
            raise AssertionError(
                f"samples {first_seen[stamp]} and {index} got the same random draw: every worker starts from the "
                "same generator state (a generator made once per worker, or copied into workers by fork), so "
                "augmentations repeat across workers. Make a generator per sample: "
                "np.random.default_rng([seed, epoch, sample_index]).")
        first_seen[stamp] = index
    _require_the_rule(stamps, 0, "epoch 0")


def augmentations_change_every_epoch(ex: ModuleType) -> None:
    _takes_epoch(ex)
    samples = dataset_samples("train", 12)
    epoch_0 = _stamps(ex, samples, 2, "ProcessLoader(epoch=0)", epoch=0)
    epoch_1 = _stamps(ex, samples, 2, "ProcessLoader(epoch=1)", epoch=1)
    again = _stamps(ex, samples, 2, "ProcessLoader(epoch=1) a second time", epoch=1)
    assert again == epoch_1, (
        "the same seed and epoch gave different draws on a second run: an epoch must be reproducible. Make each "
        "sample's generator from (seed, epoch, index) only, never from the time, the process id or an unseeded "
        "generator.")
    repeated = [i for i, (a, b) in enumerate(zip(epoch_0, epoch_1)) if a == b]
    assert not repeated, (
        f"{len(repeated)} of {len(samples)} samples got the same random draw in epochs 0 and 1 (sample {repeated[0]} "
        "first): augmentations repeat every epoch, so the model sees the same flips and crops each time (notebook 05 "
        "names this bug). Mix the epoch into each sample's generator: np.random.default_rng([seed, epoch, i])."
        + _wrong_seeding(epoch_1, 1))
    _require_the_rule(epoch_1, 1, "epoch 1")


# ---- step 4: errors and deaths --------------------------------------------------------------

def _run_until_error(ex: ModuleType, samples: list[Sample], transform, batch_size: int, timeout_s: float,
                     received: list) -> tuple[BaseException | None, float]:
    """Iterate an epoch on 2 workers; the exception next() raised (None if it ended normally) and the seconds
    from starting the loader to that exception (or to the end), not counting close()."""
    loader = require(ex, "ProcessLoader")
    returned = _Returned()
    start = time.monotonic()
    error = None
    with loader(samples, transform, batch_size, 2, SEED, timeout_s=timeout_s) as batches:
        while True:
            returned.unchanged("while the epoch went on")
            try:
                batch = next(batches)
            except StopIteration:
                break
            except NotImplementedError:
                raise
            except Exception as err:
                error = err
                break
            returned.add(batch)
            received.append(batch)
        seconds = time.monotonic() - start
    returned.unchanged("after the loader was closed")
    return error, seconds


def _end_children() -> None:
    """The loader hung: end its workers so that the grade can end."""
    for child in child_processes():
        child.kill()


def worker_error_reaches_the_parent(ex: ModuleType) -> None:
    samples = dataset_samples("train", 20)
    failing = 9
    transform = partial(_fail_on, digest=_digest(expected_crop(samples[failing].path)))
    received: list[tuple[np.ndarray, np.ndarray]] = []
    with no_leaks("a ProcessLoader whose transform failed", shared_memory=True):
        error, _ = within(45, "a ProcessLoader whose transform fails on one sample",
                          lambda: _run_until_error(ex, samples, transform, 3, 30, received))
    assert error is not None, (
        f"the transform raised ValueError on sample {failing}, but the loader ended normally after "
        f"{sum(len(images) for images, _ in received)} of {len(samples)} samples. A worker's exception must be "
        "sent to the parent and raised from next(), never swallowed: a silently short epoch is the worst kind of bug.")
    assert "planted failure in the transform" in str(error), (
        f"the parent raised {type(error).__name__}: {error}, but the worker's message ('planted failure in the "
        "transform ...') was lost. Send type(err).__name__ and str(err) from the worker and put both in the error.")
    assert type(error).__name__ == "ValueError" or "ValueError" in str(error), (
        f"the parent's error does not say the worker raised ValueError: {type(error).__name__}: {error}")
    _check_before_failure(received, samples, _expected(samples, _invert), 3, failing, "the error")


def dead_worker_is_reported(ex: ModuleType) -> None:
    samples = dataset_samples("train", 18)
    victim = 7
    transform = partial(_die_on, digest=_digest(expected_crop(samples[victim].path)))
    loader_timeout = 15.0
    received: list[tuple[np.ndarray, np.ndarray]] = []
    try:
        with no_leaks("a ProcessLoader whose worker was killed", shared_memory=True):
            error, seconds = within(30, "a ProcessLoader whose worker was killed",
                                    lambda: _run_until_error(ex, samples, transform, 3, loader_timeout, received))
    except AssertionError as err:
        _end_children()
        if "did not finish" in str(err):
            raise AssertionError(
                f"a worker was killed (SIGKILL) while loading sample {victim}, and the loader hung: it was still "
                "waiting 30 s later. Never wait without a timeout: wait on the pipe/queue with a timeout in a "
                "loop, and check process.is_alive() (or wait on process.sentinel) each time round.") from None
        raise
    assert error is not None, (
        f"a worker was killed while loading sample {victim}, but the loader ended normally: its batch was "
        "silently lost. A dead worker must be reported with an exception.")
    assert seconds < loader_timeout - 3, (
        f"the killed worker was reported only after {seconds:.1f} s, that is, by your timeout_s={loader_timeout:.0f}. "
        "Check the worker's liveness while waiting (process.is_alive(), or connection.wait on process.sentinel) "
        "so a death is reported at once.")
    text = f"{type(error).__name__}: {error}".lower()
    assert any(word in text for word in DEATH_WORDS), (
        f"the loader raised {type(error).__name__}: {error}, which does not say a worker died. Say how it ended "
        "(died, killed, terminated, its exit code: negative means killed by that signal), so the learner knows what "
        "to look for (e.g. the out-of-memory killer).")
    _check_before_failure(received, samples, _expected(samples, _invert), 3, victim, "the worker died")


def _says_timeout(error: BaseException) -> bool:
    text = f"{type(error).__name__}: {error}".lower()
    return isinstance(error, TimeoutError) or "timeout" in text or "timed out" in text


def timeout_s_bounds_each_wait(ex: ModuleType) -> None:
    steady = dataset_samples("train", STEADY_SAMPLES)
    received: list[tuple[np.ndarray, np.ndarray]] = []
    with no_leaks("a slow but steady ProcessLoader", shared_memory=True):
        error, seconds = within(60, "a slow but steady epoch", lambda: _run_until_error(
            ex, steady, partial(_sleep_on, seconds=STEADY_SLEEP_S), 2, STEADY_TIMEOUT_S, received))
    assert error is None, (
        f"with timeout_s={STEADY_TIMEOUT_S:.0f}, an epoch in which batches kept coming (one at least every "
        f"{2 * STEADY_SLEEP_S:.1f} s or so) raised {type(error).__name__}: {error} after {seconds:.1f} s and "
        f"{len(received)} batches: timeout_s bounds each wait, not the whole epoch (nor a batch's time in the queue). "
        "Start the clock when next() starts waiting.")
    _check_batches(received, steady, _expected(steady, _invert), 2, "a slow but steady epoch")

    samples = dataset_samples("train", 8)
    stuck = 2
    transform = partial(_sleep_on, seconds=STUCK_SLEEP_S, digest=_digest(expected_crop(samples[stuck].path)))
    received = []
    with no_leaks("a ProcessLoader with a stuck worker", shared_memory=True):
        error, seconds = within(STUCK_SLEEP_S + 30, "a ProcessLoader with a stuck worker",
                                lambda: _run_until_error(ex, samples, transform, 2, STUCK_TIMEOUT_S, received))
    assert error is not None and seconds < STUCK_TIMEOUT_S + START_SLACK_S, (
        f"a worker stuck for {STUCK_SLEEP_S:.0f} s on sample {stuck} (alive, sending nothing) was "
        + ("never reported" if error is None else f"reported only after {seconds:.1f} s")
        + f", with timeout_s={STUCK_TIMEOUT_S:.0f}. Give every wait a timeout of timeout_s and raise TimeoutError when "
        "it runs out: a stuck worker is not a dead one, so watching for deaths is not enough.")
    assert _says_timeout(error), (
        f"a stuck worker was reported as {type(error).__name__}: {error}; raise TimeoutError (or say that the wait "
        "timed out), so the learner knows the worker is slow or stuck rather than dead or wrong.")
    assert seconds >= STUCK_TIMEOUT_S * 0.9, (
        f"TimeoutError came {seconds:.1f} s after the loader started, before timeout_s={STUCK_TIMEOUT_S:.0f} had "
        "passed: honour the timeout_s you are given, not a fixed one.")
    _check_before_failure(received, samples, _expected(samples, _invert), 2, stuck, "the timeout")


# ---- step 5: clean shutdown -------------------------------------------------------------------

def close_leaves_nothing_behind(ex: ModuleType) -> None:
    loader = require(ex, "ProcessLoader")
    samples = dataset_samples("train", 30)
    with no_leaks("ProcessLoader.close() mid-epoch", shared_memory=True):
        batches = loader(samples, _invert, 3, 2, SEED)
        next(batches)
        within(10, "close()", batches.close)
        within(10, "a second close()", batches.close)
    with no_leaks("leaving a `with ProcessLoader(...)` block early", shared_memory=True):
        def leave_early() -> None:
            with loader(samples, _invert, 3, 2, SEED) as batches:
                next(batches)
        within(30, "a `with` block", leave_early)
    with no_leaks("iterating a ProcessLoader to the end (without calling close())", shared_memory=True):
        within(30, "iterating to the end", lambda: sum(1 for _ in loader(samples[:9], _invert, 3, 2, SEED)))


def close_stops_a_busy_worker(ex: ModuleType) -> None:
    loader = require(ex, "ProcessLoader")
    samples = dataset_samples("train", 12)
    busy = 2
    transform = partial(_sleep_on, seconds=BUSY_S, digest=_digest(expected_crop(samples[busy].path)))
    with no_leaks("close() while a worker is busy", shared_memory=True):
        batches = within(60, "starting a ProcessLoader", lambda: loader(samples, transform, 2, 2, SEED))
        within(60, "the first batch", lambda: next(batches))
        time.sleep(0.5)  # the worker of batch 1 is now inside its 120-second sample
        start = time.monotonic()
        try:
            within(CLOSE_LIMIT_S * 2, "close()", batches.close)
        except AssertionError:
            _end_children()
            raise AssertionError(
                f"close() did not return within {2 * CLOSE_LIMIT_S:.0f} s while a worker was busy on a "
                f"{BUSY_S:.0f}-second sample: it waits for the worker to finish. Join each worker with a timeout of "
                "a few seconds, then kill() the ones still alive (and join them).") from None
        took = time.monotonic() - start
    assert took < CLOSE_LIMIT_S, (
        f"close() took {took:.1f} s while a worker was busy on a {BUSY_S:.0f}-second sample: join with a shorter "
        "timeout (a few seconds in all), then kill() the workers still alive.")


# ---- step 6: speed ------------------------------------------------------------------------------

def _sequential(samples: list[Sample], transform, batch_size: int):
    """The baseline: the same work, one sample after another, in this process."""
    for start in range(0, len(samples), batch_size):
        chunk = range(start, min(start + batch_size, len(samples)))
        images = np.stack([transform(expected_crop(samples[i].path), np.random.default_rng([SEED, 0, i]))
                           for i in chunk])
        yield images, np.array([samples[i].label for i in chunk], dtype=np.int64)


def _cores_to_time(ex: ModuleType, samples: list[Sample], why_skipped_on_one_core: str) -> int | None:
    """Warm the loader up once; the usable cores, or None (with the reason printed) on a one-core machine."""
    loader = require(ex, "ProcessLoader")
    within(60, "a first ProcessLoader", lambda: list(loader(samples[:2], _as_is, 2, 1, SEED)))
    cores = usable_cores()
    if cores < 2:
        print(f"target skipped: this machine has {cores} usable core. {why_skipped_on_one_core} "
              "Correctness is graded; the timing is not.")
        return None
    return cores


def _crop_and_transform(path: str, index: int, transform) -> np.ndarray:
    """What the baseline does for one sample, in a pool's process."""
    return transform(expected_crop(path), np.random.default_rng([SEED, 0, index]))


def _plain_pool(samples: list[Sample], transform, batch_size: int, processes: int):
    """The baseline's work done by a plain multiprocessing pool, started afresh like a loader's workers and with the
    same start method: each process gets an equal share of the epoch up front, as a loader's workers get their batches
    in turn, so that the slower one sets the pace. What this machine gives this work in parallel, right now."""
    jobs = [(str(sample.path), i, transform) for i, sample in enumerate(samples)]
    with multiprocessing.get_context().Pool(processes) as pool:
        images = pool.starmap(_crop_and_transform, jobs, chunksize=-(-len(jobs) // processes))
    for start in range(0, len(samples), batch_size):
        yield np.stack(images[start:start + batch_size]), np.array([s.label for s in samples[start:start + batch_size]])


def processes_beat_the_gil(ex: ModuleType) -> Comparison | None:
    samples = dataset_samples("train", GIL_SAMPLES)
    cores = _cores_to_time(ex, samples, "Processes cannot run the transform in parallel there, so no speed-up is possible.")
    if cores is None:
        return None
    loader = ex.ProcessLoader
    transform = partial(_gil_heavy, iterations=GIL_ITERATIONS, repeats=GIL_REPEATS)
    with no_leaks("ProcessLoader", shared_memory=True):
        comparison = compare(
            lambda: _sequential(samples, transform, 8),
            lambda: loader(samples, transform, 8, cores, SEED),
            rounds=3, name=f"ProcessLoader, {cores} workers", baseline_name="sequential, one process",
            ceiling=lambda: _plain_pool(samples, transform, 8, cores),
            target_for_ceiling=lambda ceiling: 1 + GIL_TARGET_SHARE * (ceiling - 1),
            unit="images", count=count_batch,
        )
    if comparison.ceiling < GIL_CEILING_TO_TIME:
        print(f"target skipped: a plain pool of {cores} processes ran this transform only {comparison.ceiling:.2f}x as "
              "fast as one process on this machine now, too little to tell parallel work from single. Correctness is "
              "graded; the timing is not.")
        return None
    return comparison


def beats_a_naive_float32_pool(ex: ModuleType) -> Comparison | None:
    samples = dataset_samples("train", POOL_SAMPLES)
    cores = _cores_to_time(ex, samples, "The gain measured here comes from workers decoding while the parent "
                           "receives batches, which needs a second core.")
    if cores is None:
        return None
    loader = ex.ProcessLoader
    with no_leaks("ProcessLoader", shared_memory=True):
        return compare(
            lambda: naive_pool_batches(samples, 32, cores),
            lambda: loader(samples, _as_is, 32, cores, SEED),
            rounds=5, name=f"ProcessLoader uint8, {cores} workers", baseline_name=f"Pool.map float32, {cores} workers",
            target=POOL_TARGET, unit="images", count=count_batch,
        )
