"""Exercise 16: an elastic epoch under torchrun (reference solution).

Nothing about an epoch is kept but its position: the order follows from (seed, epoch), and the steps from the order,
the world size and the position, by one rule. So a restarted attempt, on any number of ranks, reads its world from
torchrun's environment, loads the last checkpoint, and splits what is left of the epoch again. A checkpoint is
written beside its path and moved over it (os.replace is atomic on POSIX and Windows), and read back by torch's
weights-only unpickler, which builds tensors, dicts, lists, numbers and strings and nothing else.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from loaderlab.elastic.world import World

# A peer that hung or vanished makes the others fail after this long, instead of gloo's 30 minutes.
STEP_TIMEOUT_S = 10.0

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RESTART_COUNT")


def read_variable(name: str) -> int:
    """The int in environment variable `name`, read now; ValueError naming it when it is missing or not an int."""
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"{name} is not set: torchrun sets it in every rank it starts (is this not under torchrun?)")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an int") from None


def world_from_environment() -> World:
    """This process's World, from torchrun's variables read when called."""
    rank, world_size, local_rank, restart_count = (read_variable(name) for name in TORCHRUN_VARIABLES)
    if world_size < 1:
        raise ValueError(f"WORLD_SIZE={world_size}: a job has at least one rank")
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK={rank} is outside [0, WORLD_SIZE={world_size})")
    if local_rank < 0:
        raise ValueError(f"LOCAL_RANK={local_rank} is negative")
    return World(rank, world_size, local_rank, restart_count)


def join(world: World) -> None:
    """Join this attempt's default process group: gloo, torchrun's MASTER_ADDR and MASTER_PORT, `world`'s rank and
    size, and STEP_TIMEOUT_S for every wait on a peer."""
    dist.init_process_group("gloo", init_method="env://", rank=world.rank, world_size=world.world_size,
                            timeout=timedelta(seconds=STEP_TIMEOUT_S))


def part_of(block: list[int], world_size: int, rank: int) -> list[int]:
    """Rank `rank`'s part of one step's block: the rank-th of `world_size` contiguous parts whose sizes differ by at
    most one, the larger first (numpy.array_split's split); a full block of W*B samples gives B to each."""
    base, extra = divmod(len(block), world_size)
    first = rank * base + min(rank, extra)
    return block[first:first + base + (rank < extra)]


def is_int(value: Any) -> bool:
    """Whether a state's value is an int (a bool is not: json writes true and false for them)."""
    return type(value) is int


class EpochPlan:
    """One epoch of `num_samples` samples in an order drawn from (seed, epoch), split into steps over any number of
    ranks from any position; `dataset` names the data."""

    def __init__(self, num_samples: int, batch_size: int, seed: int, epoch: int, dataset: str) -> None:
        if num_samples < 0 or batch_size < 1 or epoch < 0:
            raise ValueError(f"EpochPlan(num_samples={num_samples}, batch_size={batch_size}, epoch={epoch}): "
                             "num_samples must be at least 0, batch_size at least 1, epoch at least 0")
        self.num_samples, self.batch_size, self.seed, self.epoch, self.dataset = (
            num_samples, batch_size, seed, epoch, dataset)

    def order(self) -> list[int]:
        """The epoch's permutation of range(num_samples), drawn from (seed, epoch) alone. The generator's seed is a
        digest of the pair, so that no other pair meets it (seed + epoch would give seed 1's epoch 0 to seed 0's
        epoch 1)."""
        digest = hashlib.sha256(f"{self.seed},{self.epoch}".encode()).digest()
        generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") >> 1)
        return torch.randperm(self.num_samples, generator=generator).tolist()

    def steps(self, world_size: int, rank: int, start: int) -> list[list[int]]:
        """This rank's samples for each remaining step from position `start`: blocks of world_size * batch_size
        samples of the order, each split by `part_of`."""
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} of world size {world_size}: the rank must lie in [0, world size)")
        self.check_position(start, "start")
        order, block = self.order(), world_size * self.batch_size
        return [part_of(order[first:first + block], world_size, rank)
                for first in range(start, self.num_samples, block)]

    def position_after(self, start: int, steps: int, world_size: int) -> int:
        """The position once `steps` steps from `start` are done on `world_size` ranks."""
        self.check_position(start, "start")
        block = world_size * self.batch_size
        if world_size < 1 or steps < 0 or steps > -(-(self.num_samples - start) // block):
            raise ValueError(f"{steps} steps from {start} on {world_size} ranks: the epoch of {self.num_samples} "
                             f"samples has {-(-(self.num_samples - start) // max(block, 1))} steps left there")
        return min(self.num_samples, start + steps * block)

    def check_position(self, position: int, what: str) -> None:
        """ValueError unless `position` lies in [0, num_samples]."""
        if not 0 <= position <= self.num_samples:
            raise ValueError(f"{what} {position} is outside [0, {self.num_samples}] (the epoch's samples)")

    def identity(self) -> dict[str, Any]:
        """What a state must match to resume this plan: the data, the epoch's length, seed and epoch (not the batch
        size: the rest is split again with this plan's)."""
        return {"dataset": self.dataset, "num_samples": self.num_samples, "seed": self.seed, "epoch": self.epoch}

    def state_dict(self, position: int) -> dict[str, Any]:
        return {**self.identity(), "position": position}

    def position_from(self, state: dict[str, Any]) -> int:
        if not isinstance(state, dict):
            raise ValueError(f"a loader state is a dict, got {type(state).__name__}")
        expected = {**self.identity(), "position": 0}
        for key, value in expected.items():
            if key not in state:
                raise ValueError(f"the state has no {key!r} (it holds {sorted(state)})")
            fits = isinstance(state[key], str) if isinstance(value, str) else is_int(state[key])
            if not fits:
                raise ValueError(f"the state's {key!r} is {state[key]!r}, a {type(state[key]).__name__}, "
                                 f"not a{'' if isinstance(value, str) else 'n'} {type(value).__name__}")
        for key, value in self.identity().items():
            if state[key] != value:
                raise ValueError(f"the state was saved for {key} {state[key]!r}; this plan has {key} {value!r}")
        self.check_position(state["position"], "the state's position")
        return state["position"]


def save_checkpoint(path: Path, checkpoint: dict[str, Any]) -> None:
    """Write `checkpoint` whole beside `path`, flushed to the disk, then move it over `path` in one step."""
    path = Path(path)
    descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(descriptor, "wb") as out:
            torch.save(checkpoint, out)
            out.flush()
            os.fsync(out.fileno())   # the bytes on the disk before the name points at them
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    """The checkpoint at `path`, None where there is none; ValueError naming the path for a file that is not one."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        checkpoint = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as err:  # garbage, a truncated file, a pickle naming what is not a tensor or plain data
        raise ValueError(f"{path} is not a checkpoint: {type(err).__name__}: {str(err)[:200]}") from err
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path} holds a {type(checkpoint).__name__}, not a checkpoint's dict")
    return checkpoint
