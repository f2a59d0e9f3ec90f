"""Exercise 12: exact epochs over several ranks, graded in steps: one epoch split (in one process); real ranks
(2 and 3, gloo on 127.0.0.1, with a time limit); DataLoader workers; bad input. No timed check: the lesson is
correctness, and 2 cores cannot show a data-parallel speed-up honestly."""

import pytest

EXERCISE = "ex12_distributed_epochs"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "one epoch split")
def test_evaluation_covers_every_sample_once(grade):
    """Evaluation: the ranks' shares hold every index of range(N) exactly once (no padding), for N that divides by
    world_size and N that does not, more ranks than samples, and N = 0; the shares differ by at most one sample;
    len(sampler) counts what it yields."""
    grade()


@pytest.mark.step(1, "one epoch split")
def test_training_ranks_get_equal_batch_counts(grade):
    """Training: every rank yields the same number of indices, as TRAINING_POLICY states ('drop': N // world_size
    each, none twice; 'pad': ceil(N / world_size) each, every sample at least once), so DataLoaders of any
    batch size have equal batch counts."""
    grade()


@pytest.mark.step(1, "one epoch split")
def test_set_epoch_changes_the_order(grade):
    """set_epoch(e) chooses the training order: epochs 0 and 1 differ, epoch 0 again is epoch 0, two samplers with
    the same seed agree, another seed gives another order; under 'drop' every sample is trained on within 6 epochs."""
    grade()


@pytest.mark.step(2, "real ranks")
@pytest.mark.timeout_s(90)
def test_real_ranks_train_in_lockstep(grade):
    """On 2 and 3 real ranks (gloo, 127.0.0.1), a training loop with an all_reduce after every batch finishes within
    the time limit for 2 epochs, and the batches the ranks loaded obey the policy in each epoch."""
    grade()


@pytest.mark.step(2, "real ranks")
@pytest.mark.timeout_s(90)
# Under spawn: the ranks import this exercise by name and gather as in real_ranks_train_in_lockstep.
@pytest.mark.spawn_covered_by("real_ranks_train_in_lockstep")
def test_exact_mean_over_real_ranks(grade):
    """On 2 ranks over 7 samples, 3 over 11 (the scores in a tuple) and 3 over 2 (one rank with no scores), exact_mean
    of the evaluation shares' scores is the mean over all samples, each counted once, on every rank (within 1e-6), and
    a miss says whether it was a mean of means."""
    grade()


@pytest.mark.step(3, "workers")
@pytest.mark.timeout_s(120)
@pytest.mark.spawn_covered_by("stream_set_epoch_reaches_persistent_workers")
def test_stream_keeps_the_order_for_any_worker_count(grade):
    """A DataLoader over WorkerSplitStream(sampler, b) gives the sampler's indices once each, in the sampler's order
    and batches: b=3 with 0, 2 and 3 workers, b=4 with 2."""
    grade()


@pytest.mark.step(3, "workers")
@pytest.mark.timeout_s(120)
def test_stream_set_epoch_reaches_persistent_workers(grade):
    """A DataLoader over WorkerSplitStream(sampler, 3) with 2 persistent workers (persistent_workers=True), with
    stream.set_epoch(e) before each of 3 epochs, gives each epoch in that epoch's order: not epoch 0 again."""
    grade()


@pytest.mark.step(4, "bad input")
def test_bad_input_gets_a_clear_error(grade):
    """A rank of 2 or -1 for world_size=2, world_size=0 or dataset_size=-1 raises ValueError when the sampler is made
    (or first iterated)."""
    grade()
