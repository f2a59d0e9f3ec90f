"""Exercise 16, planted defect: state_dict returns the same dict every call, updated in place."""

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import EpochPlan as Honest


class EpochPlan(Honest):
    state = None

    def state_dict(self, position):
        if self.state is None:
            self.state = Honest.state_dict(self, position)
        self.state["position"] = position  # planted: an earlier state changes with it
        return self.state
