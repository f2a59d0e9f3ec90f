"""Exercise 12, planted defect: exact_mean gathers every rank's scores (all_gather_object) and joins them with
sum(..., []): exact for lists, a TypeError for a tuple of scores, which the contract (any sequence) takes too."""

from collections.abc import Sequence

import torch.distributed as dist

from solutions.ex12_distributed_epochs import TRAINING_POLICY, DistributedEpochSampler, WorkerSplitStream  # noqa: F401


def exact_mean(scores: Sequence[float]) -> float:
    gathered: list[Sequence[float]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(gathered, scores)
    every = sum(gathered, [])  # planted: a list can join only lists
    return sum(every) / len(every)
