"""Exercise 08: shards. Correctness first (bytes, labels, sizes, workers, ranks, order, storage, errors); then one timed target."""

import pytest

EXERCISE = "ex08_shards"


def test_round_trip_keeps_bytes_and_labels(grade):
    """Every sample written comes back once, its bytes identical (sha256 against the manifest) and its label right."""
    grade()


def test_shard_sizes_near_the_target(grade):
    """Shards land in out_dir, in sortable order; every shard but the last is within one sample (plus 64 KiB) of the target."""
    grade()


@pytest.mark.timeout_s(180)
def test_every_sample_once_for_any_worker_count(grade):
    """With num_workers 0 to 4, across 2 ranks, and with fewer shards than workers: every sample exactly once, decode applied."""
    grade()


def test_order_changes_between_epochs_and_repeats_for_a_seed(grade):
    """shuffle=False keeps the written order; shuffle=True mixes within shards, changes with epoch and seed, repeats for both."""
    grade()


def test_reads_go_through_storage(grade):
    """Given a storage, every shard is read through it in a few large requests, never one request per sample."""
    grade()


def test_bad_shards_raise_clear_errors(grade):
    """A folder with no shards, and a truncated shard, raise an error naming the folder or the shard."""
    grade()


@pytest.mark.throughput
@pytest.mark.timeout_s(180)
def test_shards_beat_one_request_per_file(grade):
    """Under 5 ms and 200 MB/s per request, reading 4 MB shards must give at least 3x the samples/s of one request per file."""
    grade()
