"""Exercise 06, planted defect: the epoch_length bound is off by one: 1 is refused with the 0 and the negatives
(the contract refuses only lengths below 1)."""

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    if epoch_length is not None and epoch_length <= 1:  # planted: should be < 1
        raise ValueError(f"epoch_length must be more than 1, got {epoch_length}")
    return _honest(split_dir, batch_size, num_workers, seed, epoch_length)
