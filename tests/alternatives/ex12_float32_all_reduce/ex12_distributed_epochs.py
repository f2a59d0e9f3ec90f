"""Exercise 12, a correct alternative: exact_mean all_reduces the sum and the count in ONE float32 tensor (the
default dtype), which the contract's 1e-6 allows."""

from collections.abc import Sequence

import torch
import torch.distributed as dist

from solutions.ex12_distributed_epochs import TRAINING_POLICY, DistributedEpochSampler, WorkerSplitStream  # noqa: F401


def exact_mean(scores: Sequence[float]) -> float:
    totals = torch.tensor([float(sum(scores)), float(len(scores))], dtype=torch.float32)
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return (totals[0] / totals[1]).item()
