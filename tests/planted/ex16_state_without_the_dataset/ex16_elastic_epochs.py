"""Exercise 16, planted defect: the state leaves the dataset out, so a state of other data of the same length fits."""

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as Honest


class EpochPlan(Honest):
    def identity(self):
        identity = Honest.identity(self)
        del identity["dataset"]  # planted
        return identity
