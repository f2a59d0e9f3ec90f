"""Exercise 13: resumable loading, graded in steps: one process (order, resume at any batch, the state as plain
data, the state counting what the loop received with workers); a real run killed with SIGKILL and resumed with
another worker count; no replay; bad input; then resuming must beat iterating to the saved position."""

import pytest

EXERCISE = "ex13_resumable_loading"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "one process")
def test_epoch_order_follows_seed_and_epoch(grade):
    """Every sample once per epoch in batches of 4 (the last one short, kept); len(loader) counts the batches; epochs
    0 and 1 differ; epoch 0 again (after epoch 1) is epoch 0; another seed gives another order."""
    grade()


@pytest.mark.step(1, "one process")
def test_resume_gives_the_rest_of_the_epoch(grade):
    """A state saved after 0, 1, 4, 7 or all 8 batches of epoch 2, loaded by a fresh loader, gives the uninterrupted
    epoch's batches from there on (nothing after the last); set_epoch with the saved epoch keeps the position, with
    another drops it; a second iter() after the resumed one starts the epoch from its first batch; a loader with
    batch_size 3 resumes at the same sample."""
    grade()


@pytest.mark.step(1, "one process")
def test_state_is_plain_data(grade):
    """state_dict() is a dict that survives json.dumps and json.loads unchanged, does not change as the loop goes
    on, and resumes after that trip."""
    grade()


@pytest.mark.step(1, "one process")
def test_state_counts_what_the_loop_received(grade):
    """With 2 workers, a state saved after the loop received 3 batches resumes at the 4th batch (the sampler has handed
    out 4 more by then), and the first 3 are those of a loader without workers."""
    grade()


@pytest.mark.step(2, "killed and resumed")
@pytest.mark.timeout_s(120)
def test_killed_run_resumes_with_another_worker_count(grade):
    """A training process saving a checkpoint after every batch is killed with SIGKILL mid-epoch (2 workers, after 3
    batches; 0 workers, after 5); a loader with 0 (resp. 2) workers loads the checkpoint: saved batches + rest is the
    uninterrupted epoch; after the resume without workers, the next epoch is the uninterrupted next epoch. No
    process is left behind."""
    grade()


@pytest.mark.step(3, "no replay")
def test_resume_reads_only_the_rest(grade):
    """Resuming after 6 of 8 batches reads from the dataset only the 6 samples of the rest."""
    grade()


@pytest.mark.step(4, "bad input")
def test_bad_state_gets_a_clear_error(grade):
    """load_state_dict raises ValueError for a state saved over another dataset length (the message names both), a
    state missing any key, any value of the wrong type, a negative position and a position past the epoch (every int
    that counts the position, whatever the state's shape), and leaves the loader as it was (state and next epoch)."""
    grade()


@pytest.mark.step(5, "speed")
@pytest.mark.throughput
@pytest.mark.timeout_s(120)
def test_resume_beats_fast_forward(grade):
    """At 2 ms per read, resuming at 18 of 24 batches is at least 3x as fast as iterating the epoch and throwing the
    first 18 batches away (the ideal: a quarter of the reads)."""
    grade()
