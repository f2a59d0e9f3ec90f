"""Exercise 16, a correct alternative: the order from numpy's default_rng((seed, epoch)), each step's block split by
numpy.array_split, a state of another shape (other key names, a format version), torchrun's variables read through
os.environ[...], and a checkpoint written to one fixed temporary name beside the path."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from loaderlab.elastic.world import World

STEP_TIMEOUT_S = 15


def world_from_environment() -> World:
    values = []
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RESTART_COUNT"):
        try:
            values.append(int(os.environ[name]))
        except KeyError:
            raise ValueError(f"torchrun's {name} is missing") from None
        except ValueError:
            raise ValueError(f"torchrun's {name} is {os.environ[name]!r}, not an int") from None
    world = World(*values)
    if world.world_size < 1 or not 0 <= world.rank < world.world_size or world.local_rank < 0:
        raise ValueError(f"{world} cannot be: 0 <= rank < world_size and local_rank >= 0")
    return world


def join(world: World) -> None:
    dist.init_process_group(backend="gloo", rank=world.rank, world_size=world.world_size,
                            timeout=timedelta(seconds=STEP_TIMEOUT_S))


class EpochPlan:
    FORMAT = 1

    def __init__(self, num_samples: int, batch_size: int, seed: int, epoch: int, dataset: str) -> None:
        for name, value, least in (("num_samples", num_samples, 0), ("batch_size", batch_size, 1), ("epoch", epoch, 0)):
            if value < least:
                raise ValueError(f"{name} = {value}, below {least}")
        self.num_samples, self.batch_size, self.seed, self.epoch, self.dataset = (
            num_samples, batch_size, seed, epoch, dataset)

    def order(self) -> list[int]:
        return np.random.default_rng((self.seed, self.epoch)).permutation(self.num_samples).tolist()

    def steps(self, world_size: int, rank: int, start: int) -> list[list[int]]:
        if world_size < 1 or not 0 <= rank < world_size or not 0 <= start <= self.num_samples:
            raise ValueError(f"steps({world_size}, {rank}, {start}) on an epoch of {self.num_samples}")
        rest = np.array(self.order()[start:], dtype=np.int64)
        block = world_size * self.batch_size
        return [np.array_split(rest[first:first + block], world_size)[rank].tolist()
                for first in range(0, len(rest), block)]

    def position_after(self, start: int, steps: int, world_size: int) -> int:
        if world_size < 1 or steps < 0 or not 0 <= start <= self.num_samples:
            raise ValueError(f"position_after({start}, {steps}, {world_size}) on an epoch of {self.num_samples}")
        block = world_size * self.batch_size
        if (steps - 1) * block >= self.num_samples - start and steps > 0:
            raise ValueError(f"{steps} steps from {start}: fewer remain")
        return min(self.num_samples, start + steps * block)

    def _expected(self) -> dict[str, Any]:
        return {"format": self.FORMAT, "data": self.dataset, "length": self.num_samples, "seed": self.seed,
                "epoch": self.epoch}

    def state_dict(self, position: int) -> dict[str, Any]:
        return self._expected() | {"done": position}

    def position_from(self, state: dict[str, Any]) -> int:
        if type(state) is not dict:
            raise ValueError(f"not a state: {state!r}")
        for key, value in (self._expected() | {"done": 0}).items():
            if key not in state or type(state[key]) is not type(value):
                raise ValueError(f"state[{key!r}] is missing or not a {type(value).__name__}: {state.get(key)!r}")
            if key != "done" and state[key] != value:
                raise ValueError(f"state[{key!r}] is {state[key]!r}, this plan's {key} is {value!r}")
        if not 0 <= state["done"] <= self.num_samples:
            raise ValueError(f"state['done'] = {state['done']} outside 0..{self.num_samples}")
        return state["done"]


def save_checkpoint(path: Path, checkpoint: dict[str, Any]) -> None:
    path = Path(path)
    partial = path.with_name(path.name + ".writing")
    with open(partial, "wb") as out:
        torch.save(checkpoint, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    path = Path(path)
    if not path.is_file():
        return None
    try:
        checkpoint = torch.load(path, weights_only=True)
    except Exception as err:
        raise ValueError(f"cannot load a checkpoint from {path}: {err}") from err
    if type(checkpoint) is not dict:
        raise ValueError(f"{path} holds {type(checkpoint).__name__}, a checkpoint is a dict")
    return checkpoint
