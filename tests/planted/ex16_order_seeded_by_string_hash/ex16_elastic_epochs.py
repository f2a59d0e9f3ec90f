"""Exercise 16, planted defect: the order's generator is seeded with Python's hash of a string made of the seed and
the epoch. One process always draws the same order; but Python salts str hashes per process (PYTHONHASHSEED), so every
rank, and every attempt, draws another one."""

import torch

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as _Honest


class EpochPlan(_Honest):
    def order(self):
        generator = torch.Generator().manual_seed(hash(f"{self.seed}/{self.epoch}") & 0x7FFF_FFFF)  # planted
        return torch.randperm(self.num_samples, generator=generator).tolist()
