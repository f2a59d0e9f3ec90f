"""Planted defect: the weights are NumPy's class counts indexed by the labels (`counts[labels]`): a list of labels
is an index array, but a tuple is read as one index per axis (IndexError), and the contract takes any sequence."""

import numpy as np
import torch

from solutions.ex06_balanced_sampler import *  # noqa: F403


def sample_weights(labels):
    return torch.from_numpy(1.0 / np.bincount(labels)[labels])  # planted: works for a list, not a tuple
