"""Exercise 16, planted defect: the last, short block is not spread: each rank in turn takes up to a whole batch of it,
so the first ranks get full parts and the last ones little or nothing."""

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as Honest


class EpochPlan(Honest):
    def steps(self, world_size, rank, start):
        Honest.steps(self, world_size, rank, start)  # the arguments checked as before
        order, block = self.order(), world_size * self.batch_size
        return [order[first:first + block][rank * self.batch_size:(rank + 1) * self.batch_size]  # planted
                for first in range(start, self.num_samples, block)]
