"""Notebook 11's hooks module for `loaderlab.elastic`: the loader side of a training script that survives torchrun's
restarts, in its shortest readable form (exercise 16's API; the exercise asks for its full contract, the checks of
every argument included).

- The world is read from torchrun's variables when asked, never at import: every attempt is a new start.
- The epoch's order is drawn from (seed, epoch) alone, so every rank of every attempt draws the same one.
- The state is one number: the **position** in that global order up to which the steps are committed. After a
  restart, on whatever world size, `steps` splits the rest, `order[position:]`, by the rule: step s takes the block
  `order[start + s*W*B : start + (s+1)*W*B]`, and rank r the r-th of W contiguous parts of it (numpy.array_split).
- A checkpoint is written beside its path and moved over it (`os.replace`): a kill mid-write leaves the old one whole.
- `join` sets the process group's timeout: gloo's default is 30 minutes (docs/module11-anchors.md, section 1.4).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from loaderlab.elastic.world import World

STEP_TIMEOUT_S = 10.0   # a rank waits this long for its peers in a collective, then fails (and torchrun restarts)


def world_from_environment() -> World:
    """This attempt's world, from the variables torchrun sets for every rank it starts."""
    return World(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]),
                 int(os.environ["TORCHELASTIC_RESTART_COUNT"]))


def join(world: World) -> None:
    """Join this attempt's gloo group at torchrun's MASTER_ADDR:MASTER_PORT, with a timeout of STEP_TIMEOUT_S."""
    dist.init_process_group("gloo", init_method="env://", rank=world.rank, world_size=world.world_size,
                            timeout=timedelta(seconds=STEP_TIMEOUT_S))


class EpochPlan:
    """One epoch of `num_samples` samples in batches of `batch_size` per rank, its order drawn from (seed, epoch)."""

    def __init__(self, num_samples: int, batch_size: int, seed: int, epoch: int, dataset: str) -> None:
        self.num_samples, self.batch_size, self.seed, self.epoch, self.dataset = (num_samples, batch_size, seed, epoch,
                                                                                  dataset)

    def order(self) -> list[int]:
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.num_samples).tolist()

    def steps(self, world_size: int, rank: int, start: int) -> list[list[int]]:
        """This rank's samples in each step from `start` on: the rest of the global order, split by the rule."""
        rest, block = self.order()[start:], world_size * self.batch_size
        return [np.array_split(rest[first:first + block], world_size)[rank].tolist()
                for first in range(0, len(rest), block)]

    def position_after(self, start: int, steps: int, world_size: int) -> int:
        return min(self.num_samples, start + steps * world_size * self.batch_size)

    def state_dict(self, position: int) -> dict[str, Any]:
        return {"position": position, "dataset": self.dataset, "num_samples": self.num_samples, "seed": self.seed,
                "epoch": self.epoch}

    def position_from(self, state: dict[str, Any]) -> int:
        """The position of a state saved for this epoch of this data (another batch or world size is fine)."""
        mine = self.state_dict(state["position"])
        if state != mine:
            raise ValueError(f"the state {state} is not of this epoch: expected {mine}")
        return state["position"]


def save_checkpoint(path: Path, checkpoint: dict[str, Any]) -> None:
    """Write beside `path`, then move over it: at every moment `path` holds one whole checkpoint."""
    temporary = path.with_name(path.name + ".tmp")
    torch.save(checkpoint, temporary)
    os.replace(temporary, path)


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    """The checkpoint at `path`, or None before the first one; tensors and plain data only (`weights_only`)."""
    return torch.load(path, weights_only=True) if path.exists() else None
