"""Exercise 12, planted defect: exact_mean averages the ranks' means, weighing a rank's samples by its count."""

import torch
import torch.distributed as dist

from solutions.ex12_distributed_epochs import TRAINING_POLICY, DistributedEpochSampler, WorkerSplitStream  # noqa: F401


def exact_mean(scores):
    means = torch.tensor([sum(scores) / len(scores), 1.0], dtype=torch.float64)  # planted: a mean per rank
    dist.all_reduce(means)
    total, ranks = means.tolist()
    return total / ranks
