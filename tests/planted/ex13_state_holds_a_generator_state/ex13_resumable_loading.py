"""Exercise 13, planted defect: the state keeps the generator's state (a tensor) beside (seed, epoch)."""

import torch

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def state_dict(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return {**super().state_dict(), "generator": generator.get_state()}  # planted: a tensor
