"""Exercise 16, planted defect: the rest is this rank's share of a fresh split of the whole epoch, less the steps
that the position stands for (right when the world size has not changed, wrong after a node is lost)."""

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as Honest


class EpochPlan(Honest):
    def steps(self, world_size, rank, start):
        Honest.steps(self, world_size, rank, start)  # the arguments checked as before
        done = -(-start // (world_size * self.batch_size))  # planted: steps "done", counted on this world size
        return Honest.steps(self, world_size, rank, 0)[done:]
