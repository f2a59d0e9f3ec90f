"""Checks for exercise 16 (an elastic epoch under torchrun). Steps 1-3 and 5 run in one process (the plan, the state
and the files, against a reference computed here); step 4 records the call join makes, then runs real torchrun jobs
of two nodes on this machine (`loaderlab.elastic`: the course's rank script calling the exercise's names, in the
course's sandbox) and reads the ranks' ledger of which samples each trained in which step:
  1 the plan: the world read from the environment when called; the order; the steps by the one rule from the
    epoch's start and from positions the same world size reaches; position_after;
  2 a rank killed: the state as plain data, resumed by a plan with another batch size; a checkpoint's round trip;
    a save SIGKILLed mid-write (in spawn-started processes) leaves the previous checkpoint whole;
  3 a node lost: the steps from positions another world size reached, and the rest of an epoch split again over
    another number of ranks;
  4 under torchrun: the call join makes (gloo, env://, the world's rank and size, the step timeout); then the jobs:
    every sample once in the epoch's order, equal steps; a rank SIGKILLed mid-epoch, resumed from the last
    checkpoint; a node lost, the rest on the rank that remains; a hung rank given up within STEP_TIMEOUT_S;
  5 bad input: a broken environment, bad arguments, states and files that do not fit are refused with ValueError.
"""

from __future__ import annotations

import importlib
import inspect
import json
import multiprocessing
import os
import pickle
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from types import ModuleType
from typing import Any

from grader.results import Measured
from grader.state_checks import state_through_json
from grader.support import no_leaks, raised_by, require, within
from loaderlab.distributed import kill_tree
from loaderlab.elastic.job import Fault, JobResult, JobSpec, run_job

# What these checks and the exercise import: a waiting grading process imports it once (grader.preload).
PRELOAD = ("torch",)

DATASET, OTHER_DATASET = "photos-2026-11", "photos-2026-12"
SEED, EPOCH = 3, 2
SIZES = (23, 30, 0)               # epochs that are not a multiple of any W*B below, and an empty one
BATCH_SIZES = (1, 3, 4)
WORLD_SIZES = (1, 2, 3, 5)
# Step 3: the position a 2-rank job reached after k of its steps, then the rest split on other world sizes (and,
# for a plan made anew by the resumed attempt, another batch size).
RESPLIT_SIZE, RESPLIT_BATCH, RESPLIT_FROM_WORLD = 30, 4, 2
RESPLIT_AFTER = (1, 2, 3)
RESPLIT_TO = ((1, 4), (3, 4), (3, 3))   # (world size, batch size) of the resumed attempt
STATE_POSITIONS = (0, 1, 13, 29, 30)
STATE_OTHER_BATCH = 3
ENV_TIMEOUT_S = 10                # for any one call of the exercise: they do no I/O but a small file's
# Step 4: the step timeout's bounds. Below 5 s, healthy ranks fail at the rendezvous: ranks started together reach it
# seconds apart (a torch import under spawn took 2-3 s on the 2-core development machine, ex13's checks). Above 60 s a
# hung peer holds every rank for minutes, as gloo's default of 30 minutes does for half an hour.
MIN_STEP_TIMEOUT_S, MAX_STEP_TIMEOUT_S = 5, 60
# The killed save: a spawn-started process saves a first checkpoint, then a second that stalls while it is pickled.
CHILD_TIMEOUT_S = 60.0            # for it to start (a torch import under spawn) and reach the stall
STALL_S = 120.0                   # the stall: never reached in full, the process is killed first
KILL_WAIT_S = 10.0
# A checkpoint whose bytes take a while to write: 50 M floats, 190 MiB; torch.save wrote it in 0.09-0.59 s on the
# 2-core development machine (three runs, /tmp on disk), so a kill at the moment the path changes lands mid-write for
# a save that writes over the path.
LARGE_CHECKPOINT_FLOATS = 50_000_000
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RESTART_COUNT")
# Worlds an attempt may see, one after the other; the first is in the environment when the module is imported.
WORLDS = ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "0"},
          {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "0"},
          {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "2"})


# ---- helpers ---------------------------------------------------------------------------------------------------

@contextmanager
def environment(variables: Mapping[str, str | None]) -> Iterator[None]:
    """torchrun's four variables set to `variables` (None or absent: unset) while the block runs, then restored."""
    saved = {name: os.environ.get(name) for name in TORCHRUN_VARIABLES}
    try:
        for name in TORCHRUN_VARIABLES:
            os.environ.pop(name, None)
            if variables.get(name) is not None:
                os.environ[name] = variables[name]
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def _call(what: str, function: Callable[[], Any]) -> Any:
    return within(ENV_TIMEOUT_S, what, function)


def _plan(ex: ModuleType, num_samples: int, batch_size: int, seed: int = SEED, epoch: int = EPOCH,
          dataset: str = DATASET) -> Any:
    plan_class = require(ex, "EpochPlan")
    return _call(f"EpochPlan({num_samples}, {batch_size}, seed={seed}, epoch={epoch}, dataset={dataset!r})",
                 lambda: plan_class(num_samples, batch_size, seed, epoch, dataset))


def _described(num_samples: int, batch_size: int, seed: int = SEED, epoch: int = EPOCH) -> str:
    return f"EpochPlan(num_samples={num_samples}, batch_size={batch_size}, seed={seed}, epoch={epoch})"


def _order(ex: ModuleType, plan: Any, what: str) -> list[int]:
    order = _call(f"{what}.order()", plan.order)
    assert isinstance(order, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in order), (
        f"{what}.order() returned {type(order).__name__} {str(order)[:80]}: return a list of ints (.tolist()).")
    return order


def _ranks_steps(plan: Any, world_size: int, start: int, what: str) -> list[list[list[int]]]:
    """plan.steps(world_size, rank, start) for every rank, each checked to be a list of lists of ints."""
    by_rank = []
    for rank in range(world_size):
        steps = _call(f"{what}.steps({world_size}, {rank}, {start})", lambda: plan.steps(world_size, rank, start))
        assert isinstance(steps, list) and all(
            isinstance(step, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in step)
            for step in steps), (
            f"{what}.steps({world_size}, {rank}, {start}) returned {str(steps)[:120]}: a list with a list of ints "
            "per step (.tolist() for a tensor or an array).")
        by_rank.append(steps)
    return by_rank


def rule_steps(order: list[int], world_size: int, batch_size: int, start: int) -> list[list[list[int]]]:
    """THE RULE, for every rank: step s takes order[start + s*W*B : start + (s+1)*W*B]; rank r the r-th of W contiguous
    parts of it, whose sizes differ by at most one, the larger first."""
    block = world_size * batch_size
    by_rank: list[list[list[int]]] = [[] for _ in range(world_size)]
    for first in range(start, len(order), block):
        samples = order[first:first + block]
        base, extra = divmod(len(samples), world_size)
        for rank in range(world_size):
            begin = rank * base + min(rank, extra)
            by_rank[rank].append(samples[begin:begin + base + (rank < extra)])
    return by_rank


def _in_step_rank_order(by_rank: list[list[list[int]]]) -> list[int]:
    steps = max((len(steps) for steps in by_rank), default=0)
    return [i for step in range(steps) for steps_of_rank in by_rank if step < len(steps_of_rank)
            for i in steps_of_rank[step]]


def _shape_problem(by_rank: list[list[list[int]]], order: list[int], world_size: int, batch_size: int,
                   start: int) -> str | None:
    """What breaks the rule's shape, read from any position: the step count, the (step, rank) reading, full blocks
    of B per rank. None where the shape holds (the last block's split is judged apart)."""
    expected_steps = -(-(len(order) - start) // (world_size * batch_size))
    counts = [len(steps) for steps in by_rank]
    if len(set(counts)) > 1:
        return (f"the ranks have {counts} steps: every rank must have the same number, or the ranks with more wait "
                "forever in a collective that the others never join.")
    if counts[0] != expected_steps:
        return (f"every rank has {counts[0]} steps, where ceil(({len(order)} - {start}) / ({world_size} x "
                f"{batch_size})) = {expected_steps} steps remain: a step takes the next {world_size * batch_size} "
                "samples of the order, whatever the position.")
    read = _in_step_rank_order(by_rank)
    if read != order[start:]:
        lost = sorted(set(order[start:]) - set(read))
        twice = sorted({i for i in read if read.count(i) > 1})
        before = sorted(set(read) & set(order[:start]))
        return ("reading the steps in (step, rank) order does not give order[start:]: "
                + (f"samples {lost[:8]} of the rest are missing; " if lost else "")
                + (f"samples {twice[:8]} come twice; " if twice else "")
                + (f"samples {before[:8]} were before the position (done already); " if before else "")
                + ("" if lost or twice or before else "the samples are all there, out of order; ")
                + "the rest of the epoch is order[start:], split block by block.")
    for step in range(expected_steps - 1):
        sizes = [len(steps[step]) for steps in by_rank]
        if sizes != [batch_size] * world_size:
            return (f"step {step} (not the last) gives the ranks {sizes} samples: a full block gives each rank "
                    f"batch_size = {batch_size}.")
    return None


def _last_block_problem(by_rank: list[list[list[int]]], world_size: int) -> str | None:
    if not by_rank[0]:
        return None
    sizes = [len(steps[-1]) for steps in by_rank]
    total = sum(sizes)
    base, extra = divmod(total, world_size)
    expected = [base + (rank < extra) for rank in range(world_size)]
    if sizes != expected:
        return (f"the last block of {total} samples is split {sizes} over the {world_size} ranks: its parts must "
                f"differ by at most one, the larger first ({expected}), as numpy.array_split splits it.")
    return None


def _rest_cases(sizes: tuple[int, ...], aligned: bool) -> Iterator[tuple[int, int, int, int]]:
    """(num_samples, batch_size, world_size, start) over the grid: from the epoch's start, from a position this world
    size reaches (a multiple of W*B) and the end (aligned); or from positions it does not reach (not aligned)."""
    for num_samples in sizes:
        for batch_size in BATCH_SIZES:
            for world_size in WORLD_SIZES:
                block = world_size * batch_size
                if aligned:
                    starts = {0, (-(-num_samples // block) // 2) * block, num_samples}
                else:
                    middle = num_samples // 2 + (num_samples // 2 % block == 0)
                    starts = {start for start in (middle, num_samples - 1) if 0 < start < num_samples
                              and start % block}
                for start in sorted(starts):
                    yield num_samples, batch_size, world_size, start


# ---- step 1: under torchrun ------------------------------------------------------------------------------------

def _world_fields(world: Any) -> dict[str, Any]:
    return {name: getattr(world, name, "<missing>") for name in ("rank", "world_size", "local_rank", "restart_count")}


def _expected_world(variables: Mapping[str, str]) -> dict[str, int]:
    return {"rank": int(variables["RANK"]), "world_size": int(variables["WORLD_SIZE"]),
            "local_rank": int(variables["LOCAL_RANK"]), "restart_count": int(variables["TORCHELASTIC_RESTART_COUNT"])}


def world_is_read_when_called(ex: ModuleType) -> None:
    first, *later = WORLDS
    with environment(first):
        _call("importing the exercise again", lambda: importlib.reload(ex))
    try:
        for variables in [*later, first, later[0]]:
            _check_world_read(ex, first, variables)
    finally:  # imported once more as the grader found it, so that nothing kept at import outlives this check
        _call("importing the exercise again", lambda: importlib.reload(ex))


def _check_world_read(ex: ModuleType, first: Mapping[str, str], variables: Mapping[str, str]) -> None:
    read = require(ex, "world_from_environment")
    with environment(variables):
        world = _call(f"world_from_environment() with {variables}", read)
    expected = _expected_world(variables)
    assert type(world).__name__ == "World" and _world_fields(world) == expected, (
        f"imported with {first}, then called with {variables}: world_from_environment() returned {world!r}, "
        f"expected World({', '.join(f'{k}={v}' for k, v in expected.items())}). "
        + ("It gave the world of the environment at import: read the variables when called. "
           if _world_fields(world) == _expected_world(first) else "")
        + "Each attempt of a torchrun job starts the script again, maybe on another rank of another world size.")


def order_follows_seed_and_epoch(ex: ModuleType) -> None:
    size = 30
    what = _described(size, 4)
    order = _order(ex, _plan(ex, size, 4), what)
    assert sorted(order) == list(range(size)), (
        f"{what}.order() is {order}: not a permutation of range({size}), every sample once.")
    assert order != list(range(size)), f"{what}.order() is range({size}) in order: draw a permutation."
    again = _order(ex, _plan(ex, size, 3, dataset=OTHER_DATASET), _described(size, 3))
    assert _order(ex, _plan(ex, size, 4), what) == order and again == order, (
        f"{what}.order() gave another permutation on a second plan with the same seed and epoch (or with another "
        "batch size): every rank and every attempt must draw the same order from (seed, epoch) alone.")
    others = {f"epoch {EPOCH + 1}": (SEED, EPOCH + 1), f"epoch {EPOCH - 1}": (SEED, EPOCH - 1),
              f"seed {SEED + 1}": (SEED + 1, EPOCH),
              f"seed {SEED + 1} and epoch {EPOCH - 1} (the same seed + epoch)": (SEED + 1, EPOCH - 1)}
    for name, (seed, epoch) in others.items():
        other = _order(ex, _plan(ex, size, 4, seed=seed, epoch=epoch), _described(size, 4, seed, epoch))
        assert other != order, (
            f"the order with {name} is the order of seed {SEED}, epoch {EPOCH}: "
            + ("every epoch would repeat the same order: seed the generator with the epoch too."
               if seed == SEED else "another seed must give another order: seed the generator with the seed."
               if epoch == EPOCH else f"seed + epoch gives seed {seed}'s epoch {epoch} the order of seed {SEED}'s "
               f"epoch {EPOCH}: seed the generator from the pair, not from its sum."))


def steps_split_the_epoch(ex: ModuleType) -> None:
    for num_samples, batch_size, world_size, start in _rest_cases(SIZES, aligned=True):
        what = _described(num_samples, batch_size)
        plan = _plan(ex, num_samples, batch_size)
        order = _order(ex, plan, what)
        by_rank = _ranks_steps(plan, world_size, start, what)
        expected = rule_steps(order, world_size, batch_size, start)
        if by_rank == expected:
            continue
        problem = (_shape_problem(by_rank, order, world_size, batch_size, start)
                   or _last_block_problem(by_rank, world_size)
                   or f"the parts are {by_rank}, the rule's {expected}.")
        raise AssertionError(f"{what}, {world_size} ranks, from position {start}: {problem}")


def position_after_agrees_with_steps(ex: ModuleType) -> None:
    for num_samples in SIZES:
        for batch_size in BATCH_SIZES:
            plan, what = _plan(ex, num_samples, batch_size), _described(num_samples, batch_size)
            for world_size in WORLD_SIZES:
                block = world_size * batch_size
                for start in sorted({0, num_samples // 2, max(num_samples - 1, 0), num_samples}):
                    remaining = -(-(num_samples - start) // block)
                    for done in range(remaining + 1):
                        position = _call(f"{what}.position_after({start}, {done}, {world_size})",
                                         lambda: plan.position_after(start, done, world_size))
                        expected = min(num_samples, start + done * block)
                        assert position == expected and type(position) is int, (
                            f"{what}.position_after({start}, {done}, {world_size}) is {position!r}: the first {done} "
                            f"steps from {start} on {world_size} ranks hold {expected - start} samples, so the "
                            f"position is {expected}"
                            + (f" (the last step is short: the epoch ends at {num_samples})."
                               if expected < start + done * block else ".") + " A checkpoint records it; the next "
                            "attempt starts there.")


# ---- step 2: a rank killed -------------------------------------------------------------------------------------

def state_is_plain_data_and_resumes(ex: ModuleType) -> None:
    size, batch = 30, 4
    plan, what = _plan(ex, size, batch), _described(size, batch)
    other_batch = _plan(ex, size, STATE_OTHER_BATCH)
    for position in STATE_POSITIONS:
        state = _call(f"{what}.state_dict({position})", lambda: plan.state_dict(position))
        assert isinstance(state, dict), f"{what}.state_dict({position}) returned a {type(state).__name__}: a dict."
        kept = state_through_json(state, f"at position {position}")
        assert kept == state, (
            f"{what}.state_dict({position}) is {state!r}, but after json.dumps and json.loads it reads {kept!r}: use "
            "str keys and int or str values (a tuple comes back a list, an int key a string).")
        for resumed, name in ((plan, what), (other_batch, _described(size, STATE_OTHER_BATCH))):
            got = _call(f"{name}.position_from(state)", lambda: resumed.position_from(kept))
            assert got == position, (
                f"{what}.state_dict({position}), through json, then {name}.position_from(it) gave {got!r}, not "
                f"{position}" + (": the state counts samples, so another batch size resumes at the same sample."
                                 if resumed is other_batch else "."))
    first = _call(f"{what}.state_dict(8)", lambda: plan.state_dict(8))
    snapshot = json.dumps(first, sort_keys=True)
    second = _call(f"{what}.state_dict(13)", lambda: plan.state_dict(13))
    assert json.dumps(first, sort_keys=True) == snapshot and first is not second, (
        f"{what}.state_dict(8) changed when state_dict(13) was called after it: return a new dict each time (a "
        "checkpoint taken at position 8 must keep saying 8).")
    assert second != first, f"{what}: state_dict(8) and state_dict(13) are equal: the state must hold the position."


def _deep_difference(saved: Any, loaded: Any, where: str = "checkpoint") -> str | None:
    """Where `loaded` differs from `saved` (tensors compared by dtype, shape and values), or None."""
    import torch

    if isinstance(saved, torch.Tensor):
        if not isinstance(loaded, torch.Tensor):
            return f"{where} is a {type(loaded).__name__}, saved as a tensor"
        if loaded.dtype != saved.dtype or loaded.shape != saved.shape or not torch.equal(loaded, saved):
            return f"{where} is {loaded!r}, saved as {saved!r}"
        return None
    if isinstance(saved, dict):
        if not isinstance(loaded, dict) or set(loaded) != set(saved):
            keys = sorted(loaded, key=str) if isinstance(loaded, dict) else loaded
            return f"{where} holds {keys!r}, saved with the keys {sorted(saved, key=str)}"
        pairs = [(saved[key], loaded[key], f"{where}[{key!r}]") for key in saved]
    elif isinstance(saved, list | tuple):
        if type(loaded) is not type(saved) or len(loaded) != len(saved):
            return f"{where} is {loaded!r}, saved as {saved!r}"
        pairs = [(item, other, f"{where}[{i}]") for i, (item, other) in enumerate(zip(saved, loaded))]
    else:
        return None if type(loaded) is type(saved) and loaded == saved else f"{where} is {loaded!r}, saved as {saved!r}"
    return next(filter(None, (_deep_difference(*pair) for pair in pairs)), None)


def training_checkpoint(steps: int, position: int) -> dict[str, Any]:
    """A training script's checkpoint: a model's and an SGD-with-momentum optimizer's state dicts after `steps` steps
    (the optimizer's state holds tensors under int keys), a loader's state and plain data."""
    import torch

    torch.manual_seed(steps)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        optimizer.step()
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "loader": {"dataset": DATASET, "num_samples": 30, "seed": SEED, "epoch": EPOCH, "position": position},
            "step": steps, "loss": 0.25, "tags": ["elastic", "demo"], "counts": torch.arange(5, dtype=torch.int64)}


def _load(ex: ModuleType, path: Path) -> Any:
    load = require(ex, "load_checkpoint")
    return _call(f"load_checkpoint({path})", lambda: load(path))


def _save(ex: ModuleType, path: Path, checkpoint: dict[str, Any]) -> None:
    save = require(ex, "save_checkpoint")
    _call(f"save_checkpoint({path}, ...)", lambda: save(path, checkpoint))


def checkpoint_round_trips(ex: ModuleType) -> None:
    import torch

    with TemporaryDirectory(prefix="ex16-") as folder:
        path = Path(folder) / "checkpoint.pt"
        for missing in (path, Path(folder) / "no-such-folder" / "checkpoint.pt"):
            got = _load(ex, missing)
            assert got is None, (
                f"load_checkpoint({missing}), where there is no file, returned {got!r}: it must return None (the "
                "job's first attempt has no checkpoint, and a caller tells that from an empty one with `is None`).")
        for steps, position in ((2, 8), (3, 16)):
            saved = training_checkpoint(steps, position)
            _save(ex, path, saved)
            beside = sorted(p.name for p in Path(folder).iterdir())
            assert beside == [path.name], (
                f"after save_checkpoint({path.name}) returned, the folder holds {beside}: a completed save leaves "
                "the checkpoint alone (move the temporary file over the path; remove it where the save fails).")
            loaded = _load(ex, path)
            what = f"a checkpoint saved after {steps} training steps" + (", over an earlier one" if steps > 2 else "")
            difference = _deep_difference(saved, loaded)
            assert difference is None, f"{what}, then loaded: {difference}."
            model = torch.nn.Linear(3, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            optimizer.load_state_dict(loaded["optimizer"])
            assert _deep_difference(saved["optimizer"], optimizer.state_dict(), "optimizer") is None, (
                f"{what}: a new SGD optimizer that loads the saved optimizer state does not hold it.")


class StallsWhenPickled:
    """An object that, when a save pickles it, writes `marker` and then waits: the grader kills the saving process
    there, mid-write."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        Path(self.marker).write_text("pickling")
        time.sleep(STALL_S)
        return (str, ("never reached",))


class RunsCodeWhenLoaded:
    """An object whose pickle names a function to call when the file is loaded: os.mkdir of `folder` (harmless)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __reduce__(self) -> Any:
        return (os.mkdir, (self.folder,))


def save_until_killed(module_name: str, checkpoint: str, marker: str, error: str) -> None:
    """The killed save (a spawn-started process): save a first checkpoint, then a second that stalls mid-write."""
    try:
        ex = importlib.import_module(module_name)
        ex.save_checkpoint(Path(checkpoint), training_checkpoint(2, 8))
        ex.save_checkpoint(Path(checkpoint), {"step": 3, "stall": StallsWhenPickled(marker)})
    except BaseException:
        Path(error).write_text(traceback.format_exc())
        raise


def save_large_when_told(module_name: str, checkpoint: str, ready: str, go: str, error: str) -> None:
    """The other killed save (a spawn-started process): save a first checkpoint, say so, and once told, save a large
    one (the grader kills the process as soon as the path changes: while the bytes are being written, for a save
    that writes over the path)."""
    import torch

    try:
        ex = importlib.import_module(module_name)
        ex.save_checkpoint(Path(checkpoint), training_checkpoint(2, 8))
        large = {"step": 3, "weights": torch.ones(LARGE_CHECKPOINT_FLOATS)}
        Path(ready).write_text("saved")
        while not Path(go).exists():
            time.sleep(0.001)
        ex.save_checkpoint(Path(checkpoint), large)
    except BaseException:
        Path(error).write_text(traceback.format_exc())
        raise


def _killed_when_the_path_changes(process: Any, path: Path, ready: Path, go: Path, error: Path) -> None:
    """Wait for the first save, then let the large one start and SIGKILL the process the moment `path` changes."""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not ready.exists():
        if error.exists():
            raise AssertionError(f"the saving process failed before it was killed:\n{error.read_text()[-2000:]}")
        assert process.is_alive() or ready.exists(), (
            f"the saving process ended (exit code {process.exitcode}) before its second save.")
        assert time.monotonic() < deadline, f"the saving process did not save within {CHILD_TIMEOUT_S:.0f} s."
        time.sleep(0.01)
    while not path.exists():   # a save that writes in the background (what the torchrun job's check catches)
        assert time.monotonic() < deadline, f"no checkpoint at the path within {CHILD_TIMEOUT_S:.0f} s of the save."
        time.sleep(0.01)
    before = path.stat()
    go.write_text("go")
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while process.is_alive() and time.monotonic() < deadline:
        try:
            now = path.stat()
        except FileNotFoundError:
            break
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (before.st_ino, before.st_size, before.st_mtime_ns):
            break
    kill_tree(process, KILL_WAIT_S)


REPLACE_ADVICE = ("The kill came while the next checkpoint was being written: write it beside the path, and move it "
                  "over the path (os.replace) once it is complete, so that the path holds the previous checkpoint "
                  "whole until then.")


def checkpoint_survives_a_kill_mid_write(ex: ModuleType) -> None:
    expected = training_checkpoint(2, 8)
    with no_leaks("the killed save"), TemporaryDirectory(prefix="ex16-") as folder:
        _save(ex, Path(folder) / "first-try.pt", expected)  # an open TODO reads "not started" before a process starts
        marker, error = Path(folder) / "stalled", Path(folder) / "error.txt"
        saver = Path(folder) / "run"
        saver.mkdir()
        path = saver / "checkpoint.pt"
        process = multiprocessing.get_context("spawn").Process(
            target=save_until_killed, args=(ex.__name__, str(path), str(marker), str(error)))
        process.start()
        try:
            deadline = time.monotonic() + CHILD_TIMEOUT_S
            while not marker.exists():
                alive = process.is_alive()   # read first: a process that was gone had written its error already
                if error.exists():
                    raise AssertionError(f"the saving process failed before it was killed:\n{error.read_text()[-2000:]}")
                assert alive or marker.exists(), (
                    f"the saving process ended (exit code {process.exitcode}) without reaching the second save.")
                assert time.monotonic() < deadline, (
                    f"the saving process did not reach its second save within {CHILD_TIMEOUT_S:.0f} s.")
                time.sleep(0.01)
        finally:
            kill_tree(process, KILL_WAIT_S)  # SIGKILL mid-write: no finally, no atexit, no flush
        if not path.exists():
            raise AssertionError(f"a process saved a checkpoint, then was SIGKILLed while save_checkpoint wrote the "
                                 f"next: {path.name} was gone. " + REPLACE_ADVICE)
        try:
            loaded = _load(ex, path)
        except Exception as err:
            raise AssertionError(f"a process saved a checkpoint, then was SIGKILLed while save_checkpoint wrote the "
                                 f"next: load_checkpoint then raised {type(err).__name__}: {str(err)[:300]}. "
                                 + REPLACE_ADVICE) from None
        difference = _deep_difference(expected, loaded)
        assert difference is None, (
            f"killed while saving the next checkpoint, the path must still hold the previous one whole: {difference}. "
            + REPLACE_ADVICE)
        _survives_a_kill_while_writing(ex, Path(folder) / "large", expected)


def _survives_a_kill_while_writing(ex: ModuleType, folder: Path, expected: dict[str, Any]) -> None:
    """The second moment: a SIGKILL as soon as the path changes, while a large checkpoint's bytes are written."""
    folder.mkdir()
    path, ready, go, error = folder / "checkpoint.pt", folder / "ready", folder / "go", folder / "error.txt"
    process = multiprocessing.get_context("spawn").Process(
        target=save_large_when_told, args=(ex.__name__, str(path), str(ready), str(go), str(error)))
    process.start()
    try:
        _killed_when_the_path_changes(process, path, ready, go, error)
    finally:
        kill_tree(process, KILL_WAIT_S)
    what = (f"a process saved a checkpoint, then saved one of {LARGE_CHECKPOINT_FLOATS * 4 // 2**20} MiB and was "
            "SIGKILLed the moment the path changed")
    try:
        loaded = _load(ex, path) if path.exists() else None
    except Exception as err:
        raise AssertionError(f"{what}: load_checkpoint then raised {type(err).__name__}: {str(err)[:300]}. "
                             + REPLACE_ADVICE) from None
    assert loaded is not None, f"{what}: {path.name} was gone. " + REPLACE_ADVICE
    if loaded.get("step") == 3:   # the new checkpoint, whole: the path changed when it was moved there
        whole = loaded.get("weights") is not None and loaded["weights"].numel() == LARGE_CHECKPOINT_FLOATS
        assert whole, f"{what}: the path held part of the new checkpoint. " + REPLACE_ADVICE
        return
    difference = _deep_difference(expected, loaded)
    assert difference is None, f"{what}: the path held neither checkpoint whole ({difference}). " + REPLACE_ADVICE


# ---- step 3: a node lost ---------------------------------------------------------------------------------------

def rest_is_split_again_on_another_world_size(ex: ModuleType) -> None:
    for num_samples, batch_size, world_size, start in _rest_cases(SIZES[:2], aligned=False):
        what = _described(num_samples, batch_size)
        plan = _plan(ex, num_samples, batch_size)
        order = _order(ex, plan, what)
        problem = _shape_problem(_ranks_steps(plan, world_size, start, what), order, world_size, batch_size, start)
        assert problem is None, (
            f"{what}, {world_size} ranks, from position {start} (reached on another world size, not a multiple of "
            f"{world_size} x {batch_size}): {problem}")
    size, batch, world = RESPLIT_SIZE, RESPLIT_BATCH, RESPLIT_FROM_WORLD
    first = _plan(ex, size, batch)
    order = _order(ex, first, _described(size, batch))
    before = _ranks_steps(first, world, 0, _described(size, batch))
    for done in RESPLIT_AFTER:
        position = done * world * batch
        for new_world, new_batch in RESPLIT_TO:
            resumed = _plan(ex, size, new_batch)
            what = (f"{done} steps of {_described(size, batch)} on {world} ranks (position {position}), then the "
                    f"rest on {new_world} rank{'s' if new_world > 1 else ''}"
                    + (f" with batch_size {new_batch}" if new_batch != batch else ""))
            rest = _ranks_steps(resumed, new_world, position, _described(size, new_batch))
            counts = {len(steps) for steps in rest}
            together = _in_step_rank_order([steps[:done] for steps in before]) + _in_step_rank_order(rest)
            if together == order and len(counts) == 1:
                continue
            lost, twice = sorted(set(order) - set(together)), sorted({i for i in together if together.count(i) > 1})
            raise AssertionError(
                f"{what}: " + (f"the ranks have {[len(steps) for steps in rest]} steps (must be equal); "
                               if len(counts) > 1 else "")
                + (f"samples {lost[:8]} are never trained on; " if lost else "")
                + (f"samples {twice[:8]} are trained on twice; " if twice else "")
                + ("the epoch's samples are all there once, out of order; " if not (lost or twice) else "")
                + "the rest after a node is lost is order[position:], split again by the rule over the new world "
                "size: not each rank's share of a new split of the whole epoch, less the steps it had done.")


# ---- step 4: no rank waits forever -----------------------------------------------------------------------------

def _recorded_joins(ex: ModuleType, world: Any) -> list[dict[str, Any]]:
    """The init_process_group calls join(world) makes, each as its bound arguments; nothing is started."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    original = distributed_c10d.init_process_group
    signature = inspect.signature(original)
    calls: list[dict[str, Any]] = []

    def recorder(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append(dict(bound.arguments))

    owners = [dist, distributed_c10d, ex]
    rebound = [(owner, name) for owner in owners for name, value in vars(owner).items() if value is original]
    for owner, name in rebound:
        setattr(owner, name, recorder)
    try:
        _call(f"join({world})", lambda: ex.join(world))
    finally:
        for owner, name in rebound:
            setattr(owner, name, original)
    return calls


def _step_timeout(ex: ModuleType) -> Any:
    """STEP_TIMEOUT_S as the exercise sets it; "not started" while it is the stub's None."""
    timeout = require(ex, "STEP_TIMEOUT_S")
    if timeout is None:
        raise NotImplementedError("TODO(ex16, step 4) in exercises/ex16_elastic_epochs.py: STEP_TIMEOUT_S is None")
    return timeout


def join_uses_gloo_and_the_step_timeout(ex: ModuleType) -> None:
    timeout = _step_timeout(ex)
    assert isinstance(timeout, int | float) and not isinstance(timeout, bool) and (
        MIN_STEP_TIMEOUT_S <= timeout <= MAX_STEP_TIMEOUT_S), (
        f"STEP_TIMEOUT_S is {timeout!r}: a number of seconds from {MIN_STEP_TIMEOUT_S} to {MAX_STEP_TIMEOUT_S}. "
        "Shorter, healthy ranks that reach the rendezvous seconds apart fail; longer, a hung peer holds every rank "
        "that long.")
    world_class = require(ex, "World")
    for fields in ((1, 3, 1, 2), (0, 2, 0, 0)):
        world = world_class(*fields)
        with environment({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "0"}):
            calls = _recorded_joins(ex, world)
        assert len(calls) == 1, (
            f"join({world}) called torch.distributed.init_process_group {len(calls)} times: call it once.")
        call = calls[0]
        problems = []
        if str(call["backend"]).lower() != "gloo":
            problems.append(f"backend={call['backend']!r}, not 'gloo' (the course's ranks have no GPU)")
        if call["init_method"] not in (None, "env://") or call.get("store") is not None:
            problems.append(f"init_method={call['init_method']!r}, store={call.get('store')!r}: use 'env://', "
                            "torchrun's MASTER_ADDR and MASTER_PORT")
        if (call["rank"], call["world_size"]) != (world.rank, world.world_size):
            problems.append(f"rank={call['rank']}, world_size={call['world_size']} (the environment said rank 0 of "
                            f"1): pass the world's, {world.rank} of {world.world_size}")
        if call["timeout"] != timedelta(seconds=timeout):
            problems.append(f"timeout={call['timeout']!r}, not timedelta(seconds=STEP_TIMEOUT_S): without it gloo "
                            "waits 30 minutes for a peer that hung")
        assert not problems, f"join({world}) called init_process_group with " + "; ".join(problems) + "."


# ---- step 5: bad input -----------------------------------------------------------------------------------------

def _refused(call: Callable[[], Any], what: str) -> BaseException | None:
    return _call(what, lambda: raised_by(call))


def bad_environment_is_refused(ex: ModuleType) -> None:
    read = require(ex, "world_from_environment")
    good = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "0"}
    cases: list[tuple[dict[str, str | None], str | None]] = []
    for name in TORCHRUN_VARIABLES:
        cases += [(good | {name: value}, name) for value in (None, "two", "1.5", "")]
    cases += [(good | {"RANK": "2"}, None), (good | {"RANK": "-1"}, None),
              (good | {"RANK": "0", "WORLD_SIZE": "0"}, None), (good | {"LOCAL_RANK": "-1"}, None)]
    for variables, named in cases:
        with environment(variables):
            error = _refused(read, f"world_from_environment() with {variables}")
        shown = {k: v for k, v in variables.items() if v is not None}
        assert isinstance(error, ValueError), (
            f"world_from_environment() with {shown}"
            + (f" ({named} {'missing' if variables[named] is None else 'not an int'})" if named else "") + ": "
            + ("it returned a World" if error is None else f"it raised {type(error).__name__}: {error}")
            + ". Raise ValueError: torchrun sets all four variables, consistent, so anything else is not torchrun's "
            "environment, and a rank that guesses trains on the wrong samples.")
        assert named is None or named in str(error), (
            f"world_from_environment() with {shown} raised ValueError({str(error)!r}): name the variable, {named}.")
    with environment(good):
        world = _call("world_from_environment()", read)
    assert _world_fields(world) == _expected_world(good), f"with {good}, world_from_environment() gave {world!r}."


def bad_arguments_are_refused(ex: ModuleType) -> None:
    plan_class = require(ex, "EpochPlan")
    cases: list[tuple[str, Callable[[], Any]]] = [
        (f"EpochPlan({n}, {b}, {SEED}, {e}, {DATASET!r})", lambda n=n, b=b, e=e: plan_class(n, b, SEED, e, DATASET))
        for n, b, e in ((-1, 4, EPOCH), (30, 0, EPOCH), (30, -1, EPOCH), (30, 4, -1))]
    size, batch = 23, 4
    plan, described = _plan(ex, size, batch), _described(size, batch)
    for world_size, rank, start in ((2, 0, -1), (2, 0, size + 1), (2, -1, 0), (2, 2, 0), (0, 0, 0)):
        cases.append((f"{described}.steps({world_size}, {rank}, {start})",
                      lambda w=world_size, r=rank, s=start: plan.steps(w, r, s)))
    remaining = -(-(size - 5) // (2 * batch))
    for start, steps, world_size in ((-1, 0, 2), (5, -1, 2), (size + 1, 0, 2), (5, remaining + 1, 2), (5, 1, 0)):
        cases.append((f"{described}.position_after({start}, {steps}, {world_size})",
                      lambda s=start, k=steps, w=world_size: plan.position_after(s, k, w)))
    for what, call in cases:
        error = _refused(call, what)
        assert isinstance(error, ValueError), (
            f"{what} " + ("was accepted" if error is None else f"raised {type(error).__name__}: {error}")
            + ": raise ValueError. Arguments that no run can reach would give a rank a wrong share, or fail far "
            "from the cause.")


def _position_keys(state: dict[str, Any], later: dict[str, Any]) -> list[str]:
    return [key for key in state if state.get(key) != later.get(key) and type(state[key]) is int]


def _wrong_values(value: Any) -> list[Any]:
    """Values of another type than a state field's: for an int a bool, a float and a str of it; else an int."""
    if type(value) is int:
        return [bool(value) if value in (0, 1) else True, float(value), str(value)]
    return [12345, None]


def bad_state_is_refused(ex: ModuleType) -> None:
    size, batch, seed, epoch, position = 30, 4, 1, 1, 1   # a bool's value (True == 1) matches them
    plan = _plan(ex, size, batch, seed=seed, epoch=epoch)
    state = state_through_json(_call("state_dict(1)", lambda: plan.state_dict(position)), "at position 1")
    later = _call("state_dict(9)", lambda: plan.state_dict(9))
    positions = _position_keys(state, later)
    assert positions, f"state_dict(1) and state_dict(9) hold the same ints ({state}, {later}): hold the position."
    cases: list[tuple[str, Any, str | None]] = []
    for name, kwargs, words in (
            ("another epoch", {"epoch": epoch + 1}, "epoch"), ("another seed", {"seed": seed + 1}, "seed"),
            ("another dataset", {"dataset": OTHER_DATASET}, OTHER_DATASET),
            ("another num_samples", {"num_samples": size + 1}, str(size + 1))):
        other = _plan(ex, kwargs.get("num_samples", size), batch, seed=kwargs.get("seed", seed),
                      epoch=kwargs.get("epoch", epoch), dataset=kwargs.get("dataset", DATASET))
        saved = state_through_json(_call("state_dict(1)", lambda: other.state_dict(position)), "at position 1")
        cases.append((f"a state saved by a plan of {name} ({saved})", saved, words))
    cases += [(f"the state without its {key!r}", {k: v for k, v in state.items() if k != key}, None) for key in state]
    cases += [(f"the state with {key!r} = {bad!r} ({type(bad).__name__})", state | {key: bad}, None)
              for key, value in state.items() for bad in _wrong_values(value)]
    cases += [(f"the state with {positions} = {bad}", state | dict.fromkeys(positions, bad), None)
              for bad in (-1, size + 1)]
    cases += [(f"a {type(bad).__name__} for a state", bad, None) for bad in (None, [state])]
    for what, bad, words in cases:
        error = _refused(lambda: plan.position_from(bad), f"position_from({what})")
        assert isinstance(error, ValueError), (
            f"{what}, given to position_from of {_described(size, batch, seed, epoch)} on dataset {DATASET!r}: "
            + (f"it was accepted (position {plan.position_from(bad)!r})" if error is None
               else f"it raised {type(error).__name__}: {error}")
            + ". Resuming from a state that does not fit trains on the wrong samples: check every key, its type (a "
            "bool is not an int), the dataset, num_samples, seed and epoch, and that the position lies in the epoch.")
        assert words is None or words in str(error), (
            f"{what} was refused with ValueError({str(error)!r}): say what does not match ({words}).")


def bad_checkpoint_is_refused(ex: ModuleType) -> None:
    import torch

    with TemporaryDirectory(prefix="ex16-") as folder:
        good = Path(folder) / "good.pt"
        _save(ex, good, training_checkpoint(2, 8))
        whole = good.read_bytes()
        lists = Path(folder) / "list.pt"
        torch.save([1, 2, 3], lists)
        files = {"garbage": b"not a checkpoint, but bytes " * 40, "empty": b"",
                 "truncated": whole[:len(whole) // 2], "a torch-saved list": lists.read_bytes(),
                 "a pickled list": pickle.dumps([1, 2, 3])}
        for name, data in files.items():
            path = Path(folder) / f"{name.replace(' ', '-')}.pt"
            path.write_bytes(data)
            error = _refused(lambda: require(ex, "load_checkpoint")(path), f"load_checkpoint({path})")
            assert isinstance(error, ValueError), (
                f"load_checkpoint of a file holding {name} "
                + ("returned it" if error is None else f"raised {type(error).__name__}: {str(error)[:300]}")
                + ": raise ValueError naming the path, the one error a caller catches for 'this file is not a "
                "checkpoint' (torch.load raises UnpicklingError, RuntimeError, EOFError... by what is broken).")
            assert str(path) in str(error), (
                f"load_checkpoint of a file holding {name} raised ValueError({str(error)[:200]!r}): name the path, "
                f"{path}.")
            assert path.read_bytes() == data, f"load_checkpoint changed the file holding {name}: leave it as it was."
        for name, write in (("torch.save", torch.save), ("pickle", lambda obj, target: target.write_bytes(pickle.dumps(obj)))):
            ran = Path(folder) / f"ran-{name.replace('.', '-')}"
            path = Path(folder) / f"runs-code-{name.replace('.', '-')}.pt"
            write({"model": {}, "step": 1, "payload": RunsCodeWhenLoaded(str(ran))}, path)
            error = _refused(lambda: require(ex, "load_checkpoint")(path), f"load_checkpoint({path})")
            assert not ran.exists(), (
                f"load_checkpoint of a file written by {name} whose pickle names a function to call (os.mkdir, here "
                f"harmless) ran it: loading a file must build only what a checkpoint holds (tensors, dicts, lists, "
                f"numbers, strings), never call what the file names (torch.load(..., weights_only=True)).")
            assert isinstance(error, ValueError) and str(path) in str(error), (
                f"load_checkpoint of a file written by {name} that names a function to call "
                + ("returned it" if error is None else f"raised {type(error).__name__}: {str(error)[:300]}")
                + f": refuse it with ValueError naming the path, {path}.")


# ---- under torchrun: real jobs of two nodes (loaderlab.elastic) ---------------------------------------------------
#
# Each job runs the course's rank script (loaderlab.elastic.rank) under two torchrun agents in the course's sandbox,
# calling the exercise's names, and its ledger says which samples each rank trained in which step, and which steps
# count (those up to the checkpoint the next attempt loaded). Measured on the 2-core development machine, with other
# work beside it: a job of two nodes 15 s from start to end; a restart after a killed rank 4-8 s, after a lost node
# 8.7 s (keep-alive 1 s x 5), after a hung rank the solution's STEP_TIMEOUT_S (10 s) plus 8 s.

JOB_SAMPLES, JOB_BATCH = 45, 4            # 2 ranks: 6 steps, the last block 5 samples (3 + 2)
KILLED_SAMPLES, KILLED_BATCH = 60, 3      # 2 ranks: 10 steps; rank 1 killed when it begins step 6
LOST_SAMPLES, LOST_BATCH = 50, 3          # node 1 lost at step 5: the rest on 1 rank
HUNG_AT_STEP = 4
# Past STEP_TIMEOUT_S, for torchrun to stop the ranks, rendezvous and start two new ones: 8 s here after a hang (above).
# Under it by more than torchrun's 30 s between its SIGTERM and SIGKILL, so that a rank that does not end on SIGTERM
# shows (it took 38 s here); above it by room for a machine 1.5x slower with other work beside it.
RESTART_ALLOWANCE_S = 25.0
JOB_START_ALLOWANCE_S = 60.0              # the hung job's limit adds the start (6-10 s here) and the epoch's rest
JOB_TIMEOUT_S = 150.0                     # a whole job, restarts included


def _job(ex: ModuleType, **shape: Any) -> JobResult:
    """Run a job of two nodes on the exercise (its module by name, from its folder; the checks that call this are
    marked `sandbox_only`), over the checks' dataset, seed and epoch, in a folder of its own. First, in this process,
    what the job needs that a stub leaves undone ("not started")."""
    _step_timeout(ex)
    _call("EpochPlan(...).order()", lambda: ex.EpochPlan(shape["num_samples"], shape["batch_size"], SEED, EPOCH,
                                                         DATASET).order())
    spec = JobSpec(hooks=ex.__name__, path=(str(Path(ex.__file__).parent),), seed=SEED, epoch=EPOCH, dataset=DATASET,
                   **{"timeout_s": JOB_TIMEOUT_S, **shape})
    with TemporaryDirectory(prefix="ex16-job-") as folder:
        return run_job(spec, Path(folder))


def _job_failed(result: JobResult, what: str) -> str:
    return f"{what}: the job ended with status {result.returncode}. What it did, and the end of its logs:\n" \
           + result.describe()


def _exactly_once_in_order(ex: ModuleType, result: JobResult, num_samples: int, batch_size: int, what: str) -> None:
    """The steps that count, read in (step, rank) order, are the epoch's order, each sample once."""
    order = ex.EpochPlan(num_samples, batch_size, SEED, EPOCH, DATASET).order()
    trained = [sample for _, _, samples in result.committed_samples() for sample in samples]
    counts = Counter(trained)
    twice = sorted(s for s, n in counts.items() if n > 1)
    missing = sorted(set(range(num_samples)) - set(counts))
    assert not twice and not missing, (
        f"{what}: over the steps that count (each attempt's steps up to the checkpoint the next one loaded), "
        f"{len(twice)} samples were trained more than once (e.g. {twice[:5]}) and {len(missing)} never (e.g. "
        f"{missing[:5]}).\n" + result.describe())
    assert trained == order, (
        f"{what}: every sample was trained once, but not in the epoch's order: read in (step, rank) order, the steps "
        f"that count begin {trained[:12]}, the order this process draws for the epoch begins {order[:12]}.")


def _equal_steps(result: JobResult, what: str) -> None:
    """Every rank of an attempt trained as many steps as the others, among the steps that count."""
    for counts in result.counted_steps_per_rank():
        assert len(set(counts.values())) == 1, (
            f"{what}: in one attempt the ranks trained different numbers of steps ({counts}): a rank with one step "
            "more waits in its all_reduce for a partner that has left.\n" + result.describe())


def trains_every_sample_once_under_torchrun(ex: ModuleType) -> None:
    result = _job(ex, num_samples=JOB_SAMPLES, batch_size=JOB_BATCH)
    what = f"A job of two nodes, one rank each, over an epoch of {JOB_SAMPLES} samples in batches of {JOB_BATCH}"
    assert result.returncode == 0, _job_failed(result, what)
    [attempt] = result.attempts() or [None]
    assert attempt is not None and attempt.ranks == {0, 1} == attempt.ended_ranks, (
        f"{what}: expected one attempt whose ranks 0 and 1 both finished the epoch.\n" + result.describe())
    _equal_steps(result, what)
    _exactly_once_in_order(ex, result, JOB_SAMPLES, JOB_BATCH, what)


def a_killed_rank_costs_no_sample(ex: ModuleType) -> None:
    result = _job(ex, num_samples=KILLED_SAMPLES, batch_size=KILLED_BATCH, checkpoint_every=2,
                  faults=(Fault("kill_rank", at_step=6, rank=1),))
    what = (f"A job of two nodes whose rank 1 was killed (SIGKILL) as it began step 6 (a checkpoint every 2 steps, "
            f"{KILLED_SAMPLES} samples in batches of {KILLED_BATCH})")
    assert result.returncode == 0, _job_failed(result, what)
    attempts = result.attempts()
    assert len(attempts) >= 2, f"{what}: torchrun restarted nothing.\n" + result.describe()
    first, second = attempts[:2]
    last_commit = max((step for step, _ in first.committed), default=0)
    assert second.loaded_step == last_commit, (
        f"{what}: the first attempt committed its last checkpoint after step {last_commit}, but the restarted "
        f"ranks began from step {second.loaded_step}: a restart resumes from the last checkpoint, no earlier.\n"
        + result.describe())
    _equal_steps(result, what)
    _exactly_once_in_order(ex, result, KILLED_SAMPLES, KILLED_BATCH, what)


def a_lost_node_leaves_the_rest_to_the_others(ex: ModuleType) -> None:
    result = _job(ex, num_samples=LOST_SAMPLES, batch_size=LOST_BATCH, min_nodes=1,
                  faults=(Fault("kill_node", at_step=5, node=1),))
    what = (f"A job of two nodes (--nnodes=1:2) that lost node 1 (its agent and rank killed together) at step 5 "
            f"({LOST_SAMPLES} samples in batches of {LOST_BATCH})")
    assert result.returncode == 0, _job_failed(result, what)
    last = result.attempts()[-1]
    assert last.world_size == 1, (
        f"{what}: the last attempt ran on {last.world_size} ranks, not on the 1 that remained.\n" + result.describe())
    _equal_steps(result, what)
    _exactly_once_in_order(ex, result, LOST_SAMPLES, LOST_BATCH, what)


def a_hung_rank_is_given_up_within_the_timeout(ex: ModuleType) -> Measured:
    timeout_s = _step_timeout(ex)
    result = _job(ex, num_samples=JOB_SAMPLES, batch_size=JOB_BATCH,
                  timeout_s=timeout_s + RESTART_ALLOWANCE_S + JOB_START_ALLOWANCE_S,
                  faults=(Fault("hang_rank", at_step=HUNG_AT_STEP, rank=1),))
    what = f"A job of two nodes whose rank 1 hung (stopped for good) as it began step {HUNG_AT_STEP}"
    hung = [r for r in result.records if r["kind"] == "begin" and r["rank"] == 1 and r["step"] == HUNG_AT_STEP]
    assert not result.timed_out, (
        f"{what}: {timeout_s + RESTART_ALLOWANCE_S + JOB_START_ALLOWANCE_S:.0f} s after the job started, it was still "
        f"waiting: nothing gave "
        f"rank 1 up (STEP_TIMEOUT_S = {timeout_s}; does join pass it to init_process_group?).\n" + result.describe())
    assert result.returncode == 0, _job_failed(result, what)
    attempts = result.attempts()
    assert hung and len(attempts) >= 2, f"{what}: no restart followed.\n" + result.describe()
    _exactly_once_in_order(ex, result, JOB_SAMPLES, JOB_BATCH, what)
    waited = attempts[1].started_s - hung[0]["t"]
    return Measured(
        "seconds from a hung rank to the restarted ranks", waited, timeout_s + RESTART_ALLOWANCE_S, at_most=True,
        percent=False, note=f"STEP_TIMEOUT_S {timeout_s:g} s, then torchrun's restart",
        failure=(f"{what}: the restarted ranks began {waited:.1f} s after rank 1 hung, more than STEP_TIMEOUT_S "
                 f"({timeout_s} s) and {RESTART_ALLOWANCE_S:.0f} s for torchrun's restart."))
