"""Exercise 06, planted defect: num_workers=None gives half the usable cores (at least one), where the contract
says one worker process per usable core. (On a 1-core machine it cannot be told from the solution.)"""

from solutions.ex06_balanced_sampler import *  # noqa: F403
from solutions.ex06_balanced_sampler import make_balanced_loader as _honest
from loaderlab.machine import usable_cores


def make_balanced_loader(split_dir, batch_size, num_workers=None, seed=0, epoch_length=None):
    if num_workers is None:
        num_workers = max(1, usable_cores() // 2)  # planted
    return _honest(split_dir, batch_size, num_workers, seed, epoch_length)
