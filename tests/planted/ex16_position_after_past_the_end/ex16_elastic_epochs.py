"""Exercise 16, planted defect: position_after counts W*B samples for every step, the short last one too."""

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as Honest


class EpochPlan(Honest):
    def position_after(self, start, steps, world_size):
        Honest.position_after(self, start, steps, world_size)  # the arguments checked as before
        return start + steps * world_size * self.batch_size  # planted: past num_samples after the last step
