"""Notebook 11's other hooks module: the resume many training scripts write, for comparison with `m11_elastic`.

Each rank counts the steps it has done (every rank does as many), and that count is the state. On a restart it plans
the whole epoch again on the new world size and skips that many of its own steps. On the same world size that is
exactly where it was; on another one, a step no longer holds as many samples, so the count points elsewhere in the
order: on fewer ranks some samples come again, on more some are never trained. Everything else is `m11_elastic`'s.
"""

from __future__ import annotations

from loaderlab.lessons import m11_elastic
from loaderlab.lessons.m11_elastic import STEP_TIMEOUT_S, World, join, load_checkpoint, save_checkpoint, \
    world_from_environment

__all__ = ["STEP_TIMEOUT_S", "EpochPlan", "World", "join", "load_checkpoint", "save_checkpoint",
           "world_from_environment"]


class EpochPlan(m11_elastic.EpochPlan):
    """The state is the number of steps each rank has done: `start`, and what `state_dict` and `position_from` carry,
    count this rank's steps where `m11_elastic` carries a position in the order."""

    def steps(self, world_size: int, rank: int, start: int) -> list[list[int]]:
        return super().steps(world_size, rank, 0)[start:]

    def position_after(self, start: int, steps: int, world_size: int) -> int:
        return start + steps
