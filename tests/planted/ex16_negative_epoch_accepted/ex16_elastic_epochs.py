"""Exercise 16, planted defect: the constructor accepts a negative epoch."""

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as Honest


class EpochPlan(Honest):
    def __init__(self, num_samples, batch_size, seed, epoch, dataset):
        super().__init__(num_samples, batch_size, seed, max(epoch, 0), dataset)
        self.epoch = epoch  # planted: -1 kept
