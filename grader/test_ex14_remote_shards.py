"""Exercise 14: a remote shard reader, graded in steps against a real S3 server behind the course's emulated network
(the proxy's counters are the ground truth): shards against objects; requests in flight; an index and range reads; a
local cache; bad input. Timed checks compare against a baseline in the same run, with targets from the network model
r = S / (L + S/B)."""

import pytest

EXERCISE = "ex14_remote_shards"
pytestmark = pytest.mark.usefixtures("s3_server")  # one S3 server for the session, announced to every check


@pytest.mark.step(1, "shards, not objects")
def test_object_samples_one_get_each(grade):
    """object_samples over 30 objects in a shuffled order: each object's bytes and the label given, in that order,
    one GET per object and one request open at a time; with a decode, decode(bytes)."""
    grade()


@pytest.mark.step(1, "shards, not objects")
def test_shard_samples_every_sample_once(grade):
    """shard_samples over every train shard (at most 13) in a shuffled order: every sample once, shard after shard,
    each in written order, its bytes and label as stored, at most 2 requests per shard; with the reference's crop as
    the decode, the pixels of a shard's samples are the reference's (within the course's tolerance); without a decode,
    each label an int and each sample's data its image's bytes."""
    grade()


@pytest.mark.step(1, "shards, not objects")
def test_shard_samples_stream_as_they_arrive(grade):
    """A shard paced to take 2 s to arrive: shard_samples yields its first sample within 1 s of the first next()."""
    grade()


@pytest.mark.step(1, "shards, not objects")
@pytest.mark.throughput
def test_shards_beat_objects(grade):
    """Under `region`, shard_samples over 2 shards against object_samples over their samples: at least 0.5x the
    speed-up the model gives (one request per shard against one per sample, each L + S/B)."""
    grade()


@pytest.mark.step(2, "requests in flight")
def test_fetcher_keeps_order_within_the_bound(grade):
    """fetch_in_flight over 48 objects whose answers arrive out of order (20 ms +- 15 ms), with in_flight 1, 4 and 16,
    then 8 keys each given twice to a slow consumer (in_flight 3) and 5 keys with in_flight 16: each object's bytes in
    the order of the keys, never more requests open than in_flight (the proxy's count), one GET per key given."""
    grade()


@pytest.mark.step(2, "requests in flight")
def test_fetcher_stops_on_close_and_on_error(grade):
    """Closed after its first item with 7 more requests open (answers paced at 100 KB/s), and failing on a missing key:
    no thread or process the fetcher started is left 0.3 s after control returns."""
    grade()


@pytest.mark.step(2, "requests in flight")
@pytest.mark.throughput
def test_in_flight_reaches_the_model(grade):
    """Under `region` with a first-byte latency of 200 ms, fetch_in_flight at 16 in flight over 64 objects against one
    request at a time: at least 0.6x the model's speed-up min(N r, total bandwidth / S, prefixes x prefix rate) / r."""
    grade()


@pytest.mark.step(3, "an index, range reads")
def test_index_read_once_never_listed(grade):
    """ShardIndex made once and read 3 times (keys shuffled, one asked twice), and over the val split's index: the
    samples asked for, in that order, bytes and labels as stored; the index GET once, no LIST."""
    grade()


@pytest.mark.step(3, "an index, range reads")
def test_range_reads_coalesce_neighbours(grade):
    """ShardIndex.read over seven patterns of keys (runs of neighbours in several shards and every other sample of one,
    keys at random, a run last first, runs of 1 to 5, a whole shard, two neighbours across shards, keys asked twice):
    on each, every GET ranged, at most one per run of neighbours, at most 10% more bytes than the samples'."""
    grade()


@pytest.mark.step(3, "an index, range reads")
def test_non_206_answers_are_refused(grade):
    """From a server that ignores Range (200 with the whole shard), ShardIndex.read raises an error naming the shard."""
    grade()


@pytest.mark.step(4, "a local cache")
def test_cache_stays_within_budget(grade):
    """ShardCache with budgets of 2.5 mean shards, cache_dir as a nested Path and a relative str, gets from 1 and 4
    threads, then objects of many sizes (train and val shards, images) from 4 threads started at once, while a watcher
    samples the folder every 2 ms: the objects' bytes, never more on disk than the budget."""
    grade()


@pytest.mark.step(4, "a local cache")
def test_cache_keeps_each_shard_apart(grade):
    """Two shards of one basename in two splits, each got twice: each get returns its own shard's bytes."""
    grade()


@pytest.mark.step(4, "a local cache")
def test_no_shard_fetched_twice_at_once(grade):
    """8 threads asking for the same 3 shards at once (100 ms per request): one GET per shard."""
    grade()


@pytest.mark.step(4, "a local cache")
def test_cache_failure_reaches_every_waiter(grade):
    """6 threads asking for one shard at once while every body breaks off: each gets an error (or the bytes) within
    20 s, none waits on; once the network works, the next get returns the shard."""
    grade()


@pytest.mark.step(4, "a local cache")
def test_second_epoch_hits_match_lru(grade):
    """Two epochs of 30 gets each, with repeats, on a budget of 4.5 mean shards: epoch 2's GETs per shard equal the
    misses of a least-recently-used simulation of the same gets."""
    grade()


@pytest.mark.step(5, "bad input")
def test_store_errors_name_what_and_where(grade):
    """A wrong secret (ShardIndex), a missing bucket (shard_samples), a missing key (fetch_in_flight, ShardCache.get),
    no server (object_samples): each raises within 20 s an error naming the bucket or key and the endpoint's URL."""
    grade()


@pytest.mark.step(5, "bad input")
def test_broken_data_errors_name_where(grade):
    """A shard cut in the middle of a sample, at a member's boundary (after a whole sample, between a sample's image and
    its label) and without its end-of-archive blocks (shard_samples), and an index entry past its shard's end
    (ShardIndex.read): each raises within 20 s an error naming the shard (and the sample)."""
    grade()


@pytest.mark.step(5, "bad input")
def test_failures_past_every_attempt_raise(grade):
    """Every body broken off on every attempt: object_samples, shard_samples, fetch_in_flight and ShardIndex.read each
    raise within 20 s, or deliver every sample; never a short result without an error."""
    grade()
