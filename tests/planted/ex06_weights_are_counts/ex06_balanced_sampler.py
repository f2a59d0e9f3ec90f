"""Planted defect: each sample is weighted by its class's count, not by its inverse, so large classes grow."""

from collections import Counter

import torch

from solutions.ex06_balanced_sampler import *  # noqa: F403


def sample_weights(labels):
    counts = Counter(labels)
    return torch.tensor([float(counts[label]) for label in labels], dtype=torch.double)  # planted: no 1 / ...
