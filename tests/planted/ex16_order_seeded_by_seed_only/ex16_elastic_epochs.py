"""Exercise 16, planted defect: the order is drawn from the seed alone, the same every epoch."""

import torch

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as Honest


class EpochPlan(Honest):
    def order(self):
        generator = torch.Generator().manual_seed(self.seed)  # planted: the epoch left out
        return torch.randperm(self.num_samples, generator=generator).tolist()
