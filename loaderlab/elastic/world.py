"""Where a rank stands in the current attempt of an elastic job: the one type that exercise 16's
`world_from_environment`, notebook 11's hooks and the course's rank script share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class World:
    """Where this process stands in the current attempt of the job (torchrun's environment, read when called)."""

    rank: int
    world_size: int
    local_rank: int
    restart_count: int
