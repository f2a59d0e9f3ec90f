"""Exercise 12, planted defect: exact_mean takes each rank's own mean first, then all_reduces mean x count and count:
right while every rank has scores, a ZeroDivisionError on a rank whose share is empty (more ranks than samples)."""

from collections.abc import Sequence

import torch
import torch.distributed as dist

from solutions.ex12_distributed_epochs import TRAINING_POLICY, DistributedEpochSampler, WorkerSplitStream  # noqa: F401


def exact_mean(scores: Sequence[float]) -> float:
    local = sum(scores) / len(scores)  # planted: a rank with no scores divides by zero
    totals = torch.tensor([local * len(scores), float(len(scores))], dtype=torch.float64)
    dist.all_reduce(totals)
    return (totals[0] / totals[1]).item()
