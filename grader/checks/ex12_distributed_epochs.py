"""Checks for exercise 12 (exact epochs over several ranks). Step 1 and the bad input run the sampler in
this process, one rank after another; step 2 runs real ranks (2 and 3 processes joined by gloo on
127.0.0.1, `loaderlab.distributed.run_ranks`) with a time limit, so a rank left waiting in a collective
is reported as hung, not as a stalled grader; step 3 loads through DataLoaders with 0 to 3 workers."""

from __future__ import annotations

import gc
import importlib
import math
from collections import Counter
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from grader.rank_checks import rank_failure
from grader.support import no_leaks, raised_by, require, within
from loaderlab.distributed import HUNG, RankResult, RanksFailed, run_ranks

# What these checks and the exercise import: a waiting grading process imports it once (grader.preload).
PRELOAD = ("torch", "torch.distributed")

POLICIES = ("drop", "pad")
# (dataset_size, world_size): sizes that divide and sizes that do not, more ranks than samples, nothing at all.
SPLITS = ((12, 3), (10, 2), (11, 2), (7, 3), (100, 3), (2, 3), (1, 1), (0, 2))
# Real ranks, (world_size, dataset_size): sizes that do not divide, and by enough that keeping the remainder
# gives a rank a batch more (7 and 6 samples are 4 and 3 batches of 2; 5, 5 and 4 are 3, 3 and 2).
RANK_RUNS = ((2, 13), (3, 14))
RANK_BATCH = 2
RANK_EPOCHS = 2
# Once every rank has joined the group (starting, and importing torch under spawn, is not counted): the work is
# a dozen small batches, well under a second; a rank still running after this is waiting for a partner.
RANK_TIMEOUT_S = 10.0
# To start and join the group: milliseconds under fork; under spawn each rank imports torch first, 7 s for both
# runs of a check measured on 2 cores. Two runs per check must fit its 90 s limit with room to report.
RANK_STARTUP_S = 30.0
STREAM_SIZE, STREAM_WORLD, STREAM_RANK, STREAM_BATCH = 23, 2, 1, 3
# One rank's stream, (num_workers, batch_size): under spawn each worker start costs a torch import.
STREAM_RUNS = ((0, STREAM_BATCH), (2, STREAM_BATCH), (3, STREAM_BATCH), (2, STREAM_BATCH + 1))
# exact_mean's contract: within 1e-6 of the exact mean. float32 sums and counts land within 1e-8 here (measured:
# 6.8e-9 and 1.0e-8 for the two runs below); a mean of the ranks' means is 1.8e-2 and 2.6e-3 off; bfloat16, 4.5e-4.
MEAN_TOLERANCE = 1e-6
# (world_size, dataset_size, the scores' type): unequal shares; more ranks than samples; the contract takes any
# Sequence of scores, so a tuple too.
MEAN_RUNS = ((2, 7, "list"), (3, 11, "tuple"), (3, 2, "list"))
# Training under 'drop': over this many epochs every sample must be trained on (the dropped tail changes with the
# permutation); a sampler that drops the same samples every epoch never trains on them.
DROP_EPOCHS, DROP_SPLITS = 6, ((11, 2), (14, 3))
PERSISTENT_WORKERS, PERSISTENT_EPOCHS = 2, 3  # workers kept across epochs: set_epoch must still reach them


# ---- helpers ----------------------------------------------------------------------------

def _sampler(ex: ModuleType, dataset_size: int, world_size: int, rank: int, training: bool, seed: int = 0) -> Any:
    sampler_class = require(ex, "DistributedEpochSampler")
    what = f"DistributedEpochSampler({dataset_size}, {world_size}, rank={rank}, training={training}, seed={seed})"
    return within(10, what, lambda: sampler_class(dataset_size, world_size, rank, training=training, seed=seed))


def _drawn(sampler: Any, what: str, dataset_size: int) -> list[int]:
    """One iteration of the sampler, as ints; an endless one fails instead of hanging."""
    def read() -> list[int]:
        indices = []
        for index in sampler:
            indices.append(int(index))
            assert len(indices) <= 2 * dataset_size + 10, f"{what} never ends: an epoch must end."
        return indices
    return within(10, what, read)


def _shares(ex: ModuleType, dataset_size: int, world_size: int, training: bool, epoch: int = 0,
            seed: int = 0) -> list[list[int]]:
    """Every rank's indices for one epoch, rank after rank."""
    shares = []
    for rank in range(world_size):
        sampler = _sampler(ex, dataset_size, world_size, rank, training, seed)
        within(10, "set_epoch", lambda: sampler.set_epoch(epoch))
        indices = _drawn(sampler, f"rank {rank} of {world_size} over {dataset_size} samples", dataset_size)
        length = within(10, "len(sampler)", lambda: len(sampler))
        assert length == len(indices), (
            f"rank {rank} of {world_size} over {dataset_size} samples ({'training' if training else 'evaluation'}): "
            f"len(sampler) is {length} but an iteration yields {len(indices)} indices. A DataLoader's len, a "
            "progress bar and a learning-rate schedule all read len(sampler): it must count what __iter__ yields "
            "(after padding or dropping).")
        shares.append(indices)
    return shares


def _policy(ex: ModuleType) -> str:
    policy = require(ex, "TRAINING_POLICY")
    assert policy in POLICIES, f"TRAINING_POLICY is {policy!r}; state the policy your sampler follows: one of {POLICIES}."
    return policy


def _check_training_epoch(shares: list[list[int]], dataset_size: int, policy: str, where: str) -> None:
    """One training epoch's shares obey the stated policy: equal lengths, and drop or pad done right."""
    world_size = len(shares)
    lengths = {rank: len(share) for rank, share in enumerate(shares)}
    assert len(set(lengths.values())) == 1, (
        f"{where}: the ranks yield {lengths} indices: unequal batch counts. In data-parallel training every step "
        "ends in an all_reduce of the gradients, so the rank with a batch more waits there for partners that have "
        "left: the job hangs. Even the ranks out as TRAINING_POLICY says (drop the epoch's last "
        "dataset_size % world_size samples, or pad with repeats).")
    counts = Counter(index for share in shares for index in share)
    outside = sorted(index for index in counts if not 0 <= index < dataset_size)
    assert not outside, f"{where}: indices {outside[:5]} are outside range(0, {dataset_size})."
    if policy == "drop":
        expected = dataset_size // world_size
        twice = sorted(index for index, count in counts.items() if count > 1)
        assert not twice, (
            f"{where}: index {twice[0]} comes out {counts[twice[0]]} times in one epoch"
            + (f" (on ranks {[r for r, s in enumerate(shares) if twice[0] in s]})" if len(shares) > 1 else "")
            + ", under TRAINING_POLICY = 'drop'. Every rank must split ONE permutation, drawn alike on every rank "
            "from (seed, epoch) alone: a permutation seeded with the rank differs from rank to rank, so the shares "
            "overlap.")
    else:
        expected = math.ceil(dataset_size / world_size) if dataset_size else 0
        missing = sorted(set(range(dataset_size)) - set(counts))
        assert not missing, f"{where}: under TRAINING_POLICY = 'pad' every sample comes out, but {missing[:5]} never did."
    assert lengths[0] == expected, (
        f"{where}: each rank yields {lengths[0]} indices; under TRAINING_POLICY = {policy!r} with dataset_size="
        f"{dataset_size} and world_size={world_size} that is {expected} "
        + ("(dataset_size // world_size: only the remainder is dropped)." if policy == "drop"
           else "(ceil(dataset_size / world_size): only as many repeats as it takes to even the ranks out)."))


def _exercise(module_name: str) -> ModuleType:
    """The learner's module inside a rank (imported by name: a spawn-started rank imports it anew)."""
    return importlib.import_module(module_name)


# ---- functions run on every rank (top level: a spawn-started rank imports them by name) -----------------

def score_of(index: int) -> float:
    """A per-sample score with no pattern by rank, like a loss or an accuracy."""
    return ((index * 7919) % 101) / 100


def _train_on_rank(rank: int, world_size: int, module_name: str, dataset_size: int, batch_size: int,
                   epochs: int, seed: int) -> list[list[int]]:
    """A data-parallel training loop's data side: each step ends in an all_reduce, as DDP's gradient sync does."""
    ex = _exercise(module_name)
    sampler = ex.DistributedEpochSampler(dataset_size, world_size, rank, training=True, seed=seed)
    loader = DataLoader(range(dataset_size), batch_size=batch_size, sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        indices: list[int] = []
        for batch in loader:
            gradient = torch.ones(1)
            dist.all_reduce(gradient)
            indices += batch.tolist()
        seen.append(indices)
    return seen


def _evaluate_on_rank(rank: int, world_size: int, module_name: str, dataset_size: int,
                      batch_size: int, form: str) -> tuple[float, int]:
    """Score this rank's evaluation share; exact_mean over the group of the scores in a `form` ("list" or "tuple");
    (the mean it returned, samples scored here)."""
    ex = _exercise(module_name)
    sampler = ex.DistributedEpochSampler(dataset_size, world_size, rank, training=False)
    loader = DataLoader(range(dataset_size), batch_size=batch_size, sampler=sampler)
    scores: Sequence[float] = [score_of(index) for batch in loader for index in batch.tolist()]
    if form == "tuple":
        scores = tuple(scores)
    return float(ex.exact_mean(scores)), len(scores)


def _means_on_ranks(ex: ModuleType, world_size: int, dataset_size: int, form: str, what: str) -> list[RankResult]:
    with no_leaks(what):
        return run_ranks(_evaluate_on_rank, world_size, timeout_s=RANK_TIMEOUT_S, startup_timeout_s=RANK_STARTUP_S,
                         args=(ex.__name__, dataset_size, RANK_BATCH, form))


# ---- step 1: one epoch split ----------------------------------------------------------------------

def evaluation_covers_every_sample_once(ex: ModuleType) -> None:
    for dataset_size, world_size in SPLITS:
        shares = _shares(ex, dataset_size, world_size, training=False)
        where = f"evaluation over {dataset_size} samples on {world_size} ranks"
        if world_size > 1 and dataset_size > 1 and all(share == shares[0] for share in shares):
            raise AssertionError(
                f"{where}: every rank yields the same indices {shares[0][:6]}...: the split ignores rank, so each "
                "sample is scored world_size times and the job does no less work than one process. Give rank r its "
                "own share (every world_size-th index from r, or the r-th contiguous block).")
        counts = Counter(index for share in shares for index in share)
        twice = sorted(index for index, count in counts.items() if count > 1)
        assert not twice, (
            f"{where}: index {twice[0]} comes out {counts[twice[0]]} times (ranks "
            f"{[r for r, s in enumerate(shares) if twice[0] in s]}); {len(twice)} indices more than once. That is "
            "DistributedSampler's padding: it repeats samples until every rank has as many, and a validation metric "
            "then counts them twice. Evaluation needs no equal shares: give each index to exactly one rank.")
        missing = sorted(set(range(dataset_size)) - set(counts))
        outside = sorted(index for index in counts if not 0 <= index < dataset_size)
        assert not missing and not outside, (
            f"{where}: " + (f"indices {missing[:5]} never come out ({len(missing)} missing)" if missing else
                            f"indices {outside[:5]} are outside range(0, {dataset_size})")
            + ": the ranks' shares must add up to range(dataset_size) exactly, the tail that does not divide included.")
        lengths = [len(share) for share in shares]
        assert max(lengths) - min(lengths) <= 1, (
            f"{where}: the ranks' shares hold {lengths} samples: unbalanced. Every sample is scored once, but the "
            "rank with the most does the evaluation's work while the others wait for it: split range(dataset_size) "
            "so that the shares differ by at most one sample (every world_size-th index from the rank, or blocks of "
            "dataset_size // world_size with the remainder spread one each over the first ranks).")


def training_ranks_get_equal_batch_counts(ex: ModuleType) -> None:
    policy = _policy(ex)
    for dataset_size, world_size in SPLITS:
        where = f"training over {dataset_size} samples on {world_size} ranks"
        shares = _shares(ex, dataset_size, world_size, training=True, epoch=3, seed=5)
        _check_training_epoch(shares, dataset_size, policy, where)
        for batch_size in (2, 4):
            batches = [len(DataLoader(range(dataset_size), batch_size=batch_size,
                                      sampler=_sampler(ex, dataset_size, world_size, rank, True, 5)))
                       for rank in range(world_size)]
            assert len(set(batches)) == 1, (
                f"{where} with batch_size={batch_size}: the DataLoaders have {batches} batches per rank: unequal "
                "batch counts (len(sampler) differs from rank to rank).")


def set_epoch_changes_the_order(ex: ModuleType) -> None:
    size, world_size = 50, 2

    def epoch_order(sampler: Any, epoch: int) -> list[int]:
        within(10, f"set_epoch({epoch})", lambda: sampler.set_epoch(epoch))
        return _drawn(sampler, f"a training epoch (epoch {epoch})", size)

    sampler = _sampler(ex, size, world_size, 0, True, seed=1)
    first, second = epoch_order(sampler, 0), epoch_order(sampler, 1)
    assert first != second, (
        "rank 0 yields the same order in epoch 0 and epoch 1: set_epoch must choose the permutation (seed it with "
        "seed + epoch, say), or every epoch repeats the first one, batches and all.")
    again = epoch_order(sampler, 0)
    assert again == first, (
        "set_epoch(0) after epoch 1 gave another order than epoch 0 did: the order must follow from (seed, epoch) "
        "alone, not from how many epochs this sampler has run (a generator made once and advanced every "
        "iteration gives a rank that restarts, or resumes at epoch 7, another order than its partners).")
    fresh = epoch_order(_sampler(ex, size, world_size, 0, True, seed=1), 1)
    assert fresh == second, (
        "two samplers made with the same seed give different orders for epoch 1: every rank builds its own "
        "sampler, so the order must depend on (seed, epoch) only (torch.Generator().manual_seed(...), not the "
        "global generator).")
    other = epoch_order(_sampler(ex, size, world_size, 0, True, seed=2), 1)
    assert other != second, "seeds 1 and 2 give the same order: the seed must reach the permutation."
    if _policy(ex) != "drop":
        return
    for dataset_size, ranks in DROP_SPLITS:
        trained: set[int] = set()
        for epoch in range(DROP_EPOCHS):
            trained.update(index for share in _shares(ex, dataset_size, ranks, True, epoch=epoch, seed=4)
                           for index in share)
        never = sorted(set(range(dataset_size)) - trained)
        assert not never, (
            f"training over {dataset_size} samples on {ranks} ranks (seed 4), epochs 0 to {DROP_EPOCHS - 1}: samples "
            f"{never} were never trained on. Under TRAINING_POLICY = 'drop' the {dataset_size % ranks} dropped each "
            "epoch must be the permutation's last ones, so they change from epoch to epoch; dropping the same samples "
            "(the last indices of range(dataset_size), say) leaves them out of training for good.")


# ---- step 2: real ranks ---------------------------------------------------------------------------

def real_ranks_train_in_lockstep(ex: ModuleType) -> None:
    policy = _policy(ex)
    for world_size, dataset_size in RANK_RUNS:
        what = (f"{world_size} ranks training over {dataset_size} samples, batch_size={RANK_BATCH}, "
                f"{RANK_EPOCHS} epochs, an all_reduce after every batch")
        with no_leaks(what):
            results = run_ranks(_train_on_rank, world_size, timeout_s=RANK_TIMEOUT_S, startup_timeout_s=RANK_STARTUP_S,
                                args=(ex.__name__, dataset_size, RANK_BATCH, RANK_EPOCHS, 7))
        if not all(r.ok for r in results):
            lengths = {rank: len(_drawn(_sampler(ex, dataset_size, world_size, rank, True, 7), 'the sampler', dataset_size))
                       for rank in range(world_size)}
            batches = {rank: math.ceil(length / RANK_BATCH) for rank, length in lengths.items()}
            hung = any(r.status == HUNG for r in results)
            advice = (f"the ranks ran {batches} batches: unequal batch counts. The rank with a batch more entered "
                      "an all_reduce that its partners never joined"
                      + (" and hung there (on a cluster the job would sit until its time limit)." if hung else
                         ": gloo noticed they had left the group; NCCL on a cluster hangs there instead.")
                      if len(set(batches.values())) > 1 else "a rank failed (its story follows).")
            raise rank_failure(results, what, advice)
        for epoch in range(RANK_EPOCHS):
            shares = [r.value[epoch] for r in results]
            _check_training_epoch(shares, dataset_size, policy, f"{what}, epoch {epoch} as the ranks loaded it")
        assert [r.value[0] for r in results] != [r.value[1] for r in results], (
            f"{what}: both epochs loaded the same batches on every rank: the loop calls set_epoch(epoch) on the "
            "sampler before each epoch, and the order must change with it.")


def exact_mean_over_real_ranks(ex: ModuleType) -> None:
    require(ex, "exact_mean")
    for world_size, dataset_size, form in MEAN_RUNS:
        what = f"exact_mean on {world_size} ranks over {dataset_size} samples, each rank's scores in a {form}"
        results = _means_on_ranks(ex, world_size, dataset_size, form, what)
        failed = not all(r.ok for r in results)
        if failed and form != "list" and not any("NotImplementedError" in r.detail for r in results):
            in_lists = _means_on_ranks(ex, world_size, dataset_size, "list", what.replace(form, "list"))
            if all(r.ok for r in in_lists):
                raise AssertionError(f"{what}: a rank failed, and with the same scores in a list every rank ran. The "
                                     f"contract takes any sequence of scores.\n{RanksFailed(results)}")
        if failed:
            empty = "ZeroDivisionError" in "".join(r.detail for r in results) and dataset_size < world_size
            raise rank_failure(results, what, "every rank must call exact_mean (it is a collective), and return"
                                + (": a rank whose evaluation share is empty (more ranks than samples) passes no "
                                   "scores, and must still join the all_reduce with a sum and a count of 0; divide "
                                   "only the totals." if empty else "."))
        truth = sum(score_of(index) for index in range(dataset_size)) / dataset_size
        scored = {r.rank: r.value[1] for r in results}
        assert sum(scored.values()) == dataset_size, (
            f"{what}: the ranks scored {scored} samples, {sum(scored.values())} in all for a dataset of {dataset_size}: "
            + ("padding counted in the metric: the evaluation sampler repeats samples to even the ranks out, and "
               "those repeats are scored twice. Evaluation must give every sample to exactly one rank."
               if sum(scored.values()) > dataset_size else "samples are missing from the evaluation split."))
        means = {r.rank: r.value[0] for r in results}
        shares = [_drawn(_sampler(ex, dataset_size, world_size, rank, False), "the evaluation sampler", dataset_size)
                  for rank in range(world_size)]
        of_means = sum(sum(map(score_of, share)) / len(share) for share in shares if share) / world_size
        for rank, mean in means.items():
            if abs(mean - truth) <= MEAN_TOLERANCE:
                continue
            if abs(mean - of_means) <= MEAN_TOLERANCE:
                raise AssertionError(
                    f"{what}: rank {rank} got {mean:.9f}, the true mean of all {dataset_size} scores is {truth:.9f}, "
                    f"and the mean of the ranks' means is {of_means:.9f}: that is what it computed. The ranks scored "
                    f"{scored} samples: a mean of the ranks' means weighs a rank's sample by 1 / (its rank's count), "
                    "so unequal shares skew it. all_reduce the SUM of the scores and their COUNT, then divide, on "
                    "every rank.")
            raise AssertionError(
                f"{what}: rank {rank} got {mean:.9f}, the true mean of all {dataset_size} scores is {truth:.9f}: "
                f"{abs(mean - truth):.1e} off, more than the {MEAN_TOLERANCE:g} the contract allows (every rank got "
                f"{means}). It is not the mean of the ranks' means ({of_means:.9f}): "
                + ("the ranks returned different values, and every rank must return the same mean (all_reduce, not "
                   "reduce to one rank)." if len(set(means.values())) > 1 else
                   "sum and count in float32 or float64 (a half-precision tensor rounds the sum), and all_reduce "
                   "both with the SUM op, every sample once."))


# ---- step 3: workers ----------------------------------------------------------------------------

def stream_keeps_the_order_for_any_worker_count(ex: ModuleType) -> None:
    stream_class = require(ex, "WorkerSplitStream")
    sampler = _sampler(ex, STREAM_SIZE, STREAM_WORLD, STREAM_RANK, True, seed=3)
    sampler.set_epoch(2)
    order = _drawn(sampler, "the sampler", STREAM_SIZE)
    for workers, batch_size in STREAM_RUNS:
        expected = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
        what = (f"DataLoader(WorkerSplitStream(sampler of rank {STREAM_RANK}, {batch_size}), batch_size={batch_size}, "
                f"num_workers={workers})")

        def load() -> list[list[int]]:
            loader = DataLoader(stream_class(sampler, batch_size), batch_size=batch_size,
                                num_workers=workers, timeout=30 if workers else 0)
            return [batch.tolist() for batch in loader]

        with no_leaks(what):
            batches = within(60, what, load)
        loaded = [index for batch in batches for index in batch]
        counts = Counter(loaded)
        assert sorted(loaded) == sorted(order), (
            f"{what} loaded {len(loaded)} indices for the sampler's {len(order)}"
            + (f"; index {max(counts, key=counts.get)} {max(counts.values())} times" if counts and max(counts.values()) > 1 else "")
            + ": each worker gets its own copy of the stream, so each must yield only its part (read "
            "get_worker_info() in __iter__), and the parts must add up to the sampler's indices once.")
        assert batches == expected, (
            f"{what} gave the batches {batches[:4]}..., but the sampler's order in batches of {batch_size} is "
            f"{expected[:4]}...: the order changed with the number of workers. The DataLoader takes one batch from "
            "each worker in turn, and each worker batches what IT yields: give worker w whole batches (batch i to "
            "worker i % n), not every n-th sample.")


def stream_set_epoch_reaches_persistent_workers(ex: ModuleType) -> None:
    stream_class = require(ex, "WorkerSplitStream")
    sampler = _sampler(ex, STREAM_SIZE, STREAM_WORLD, STREAM_RANK, True, seed=3)
    reference = _sampler(ex, STREAM_SIZE, STREAM_WORLD, STREAM_RANK, True, seed=3)
    expected = []
    for epoch in range(PERSISTENT_EPOCHS):
        reference.set_epoch(epoch)
        expected.append(_drawn(reference, f"the sampler in epoch {epoch}", STREAM_SIZE))
    stream = stream_class(sampler, STREAM_BATCH)
    if not callable(getattr(stream, "set_epoch", None)):
        raise AssertionError("MISSING: WorkerSplitStream has no set_epoch(epoch) method; the contract asks for one.")
    what = (f"DataLoader(WorkerSplitStream(sampler of rank {STREAM_RANK}), batch_size={STREAM_BATCH}, "
            f"num_workers={PERSISTENT_WORKERS}, persistent_workers=True), stream.set_epoch(e) before each of "
            f"epochs 0 to {PERSISTENT_EPOCHS - 1}")

    def load() -> list[list[int]]:
        loader = DataLoader(stream, batch_size=STREAM_BATCH, num_workers=PERSISTENT_WORKERS, persistent_workers=True,
                            timeout=30)
        epochs = []
        for epoch in range(PERSISTENT_EPOCHS):
            stream.set_epoch(epoch)
            epochs.append([index for batch in loader for index in batch.tolist()])
        del loader  # its persistent workers stop with it
        gc.collect()
        return epochs

    with no_leaks(what):
        epochs = within(90, what, load)
    for epoch, (loaded, order) in enumerate(zip(epochs, expected)):
        if loaded == order:
            continue
        if epoch > 0 and loaded == expected[0]:
            raise AssertionError(
                f"{what}: epoch {epoch} replayed epoch 0's order. With persistent_workers=True each worker keeps the "
                "copy of the stream it was started with, across epochs, so set_epoch changed only this process's "
                "copy. Make the epoch reach the workers: keep it in a value shared with them (a "
                "multiprocessing.RawValue or Value made in __init__, which travels to each worker with the stream), "
                "write it in set_epoch, and set the sampler's epoch from it at the start of __iter__.")
        raise AssertionError(
            f"{what}: epoch {epoch} loaded {loaded[:8]}..., not the sampler's order for that epoch {order[:8]}...: "
            "every pass must follow the epoch set last, in the sampler's order and batches.")


# ---- step 4: bad input ----------------------------------------------------------------------------

def bad_input_gets_a_clear_error(ex: ModuleType) -> None:
    sampler_class = require(ex, "DistributedEpochSampler")
    for arguments in ((10, 2, 2), (10, 2, -1), (10, 0, 0), (-1, 2, 0)):
        dataset_size, world_size, rank = arguments

        error = within(10, f"DistributedEpochSampler{arguments}",
                       lambda: raised_by(lambda: list(sampler_class(dataset_size, world_size, rank, training=True))))
        assert isinstance(error, ValueError), (
            f"DistributedEpochSampler(dataset_size={dataset_size}, world_size={world_size}, rank={rank}, training=True) "
            + ("was accepted" if error is None else f"raised {type(error).__name__}: {error}")
            + ": a rank outside [0, world_size), a world_size below 1 or a negative dataset_size is a launch "
            "mistake; raise ValueError naming it when the sampler is made (otherwise it shows up as a silent "
            "overlap, or a hang, much later).")
