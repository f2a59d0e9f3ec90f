"""Exercise 16, planted defect: join leaves gloo's default timeout of 30 minutes."""

import torch.distributed as dist

from solutions.ex16_elastic_epochs import *  # noqa: F403


def join(world):
    dist.init_process_group("gloo", init_method="env://", rank=world.rank, world_size=world.world_size)  # planted
