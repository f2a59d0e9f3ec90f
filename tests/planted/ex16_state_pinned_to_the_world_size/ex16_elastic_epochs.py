"""Exercise 16, planted defect: the loader's state records the world size it was saved on (from torchrun's
WORLD_SIZE), and a state saved on another world size is refused, "so that a job never resumes with another shape". In
one process the world never changes; after a node is lost, the job cannot resume at all."""

import os

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as _Honest


class EpochPlan(_Honest):
    def state_dict(self, position):
        return {**super().state_dict(position), "world_size": os.environ.get("WORLD_SIZE", "1")}

    def position_from(self, state):
        here = os.environ.get("WORLD_SIZE", "1")
        if isinstance(state, dict) and state.get("world_size", here) != here:  # planted: the world size pinned
            raise ValueError(f"the state was saved on {state['world_size']} ranks, and this attempt has {here}")
        return super().position_from({key: value for key, value in state.items() if key != "world_size"}
                                     if isinstance(state, dict) else state)
