"""Exercise 08: shards. Correctness first, step by step (write, read back, split, shuffle, storage and errors); then one
timed target."""

import pytest

EXERCISE = "ex08_shards"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "write shards")
def test_shard_sizes_near_the_target(grade):
    """For targets from smaller than one sample to larger than the dataset (root and out_dir given as Paths, and for
    one target as relative strs): shards land in out_dir, in sortable order, none empty, every one but the last within
    one sample (plus the format's own bytes) of the target."""
    grade()


@pytest.mark.step(2, "read them back in order")
def test_round_trip_keeps_bytes_and_labels(grade):
    """shuffle=False in one process: every sample written comes back once, in written order, its bytes identical (sha256)
    and its label right, again on a second pass, with decode applied; also with one sample per shard and with one shard
    (out_dir given as a relative str)."""
    grade()


@pytest.mark.step(3, "split across workers and ranks")
@pytest.mark.timeout_s(300)
@pytest.mark.spawn_case_of_its_own
def test_every_sample_once_for_any_worker_count(grade):
    """shuffle=False, 1 to 3 ranks with 0 to 3 workers (once under spawn), fewer shards than slots: every sample exactly
    once, whole shards per slot, each slot in written order, decode run in the worker."""
    grade()


@pytest.mark.step(4, "shuffle per epoch")
@pytest.mark.timeout_s(300)
@pytest.mark.spawn_case_of_its_own
def test_every_sample_once_when_shuffled(grade):
    """shuffle=True, 1 to 3 ranks with 0 to 3 workers (once under spawn), buffer sizes from 1 to larger than the dataset:
    every sample exactly once, whole shards per slot: one shard order shared by every worker and rank."""
    grade()


@pytest.mark.step(4, "shuffle per epoch")
@pytest.mark.timeout_s(240)
# Under spawn: the same shuffled ShardDataset, set_epoch and all, in spawn workers.
@pytest.mark.spawn_covered_by("every_sample_once_when_shuffled")
def test_order_changes_between_epochs_and_repeats_for_a_seed(grade):
    """shuffle=True: the order changes with set_epoch and the seed, repeats for both (also when iterated again without
    set_epoch), a new dataset starts at epoch 0, and two datasets alive at once leave each other's order alone."""
    grade()


@pytest.mark.step(4, "shuffle per epoch")
def test_shuffle_mixes_shard_order_and_samples(grade):
    """buffer_size=1: whole shards straight through, in a shard order that is shuffled and changes per epoch; a buffer
    larger than the dataset: a full shuffle; a buffer of 64: at most 30% of written neighbours stay neighbours."""
    grade()


@pytest.mark.step(5, "remote reads and bad shards")
def test_reads_go_through_storage(grade):
    """Given a storage, every shard is read through it in a few large requests, never one per sample, and each shard
    once per epoch over all ranks."""
    grade()


@pytest.mark.step(5, "remote reads and bad shards")
@pytest.mark.timeout_s(180)
def test_bad_shards_raise_clear_errors(grade):
    """A shard cut short (read through storage, locally, in a worker), a folder with no shards and a missing folder
    raise an error naming the shard or the folder."""
    grade()


@pytest.mark.step(6, "speed")
@pytest.mark.throughput
@pytest.mark.timeout_s(180)
def test_shards_beat_one_request_per_file(grade):
    """Under 5 ms and 200 MB/s per request, reading 4 MB shards must give at least 3x the samples/s of one request per file."""
    grade()
