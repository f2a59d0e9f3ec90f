"""Exercise 13, planted defect: the permutation is seeded with the worker count too, so a resume with another count continues another order."""

import torch

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def epoch_order(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch + 1000 * self.num_workers)  # planted
        return torch.randperm(len(self.dataset), generator=generator).tolist()
