"""Exercise 16, planted defect: join lets init_process_group read the rank and world size from the environment again
(env:// would), instead of passing the world it was given."""

from datetime import timedelta

import torch.distributed as dist

import solutions.ex16_elastic_epochs as _solution
from solutions.ex16_elastic_epochs import *  # noqa: F403


def join(world):
    dist.init_process_group("gloo", init_method="env://",  # planted: no rank=, no world_size=
                            timeout=timedelta(seconds=_solution.STEP_TIMEOUT_S))
