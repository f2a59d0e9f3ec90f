"""Exercise 15: exactly once over a flaky network, on every rank, graded in steps against a real S3 server behind the
course's emulated network, whose counters (requests, bytes and SlowDowns per key and over time) are the ground truth:
retries that resume a cut body and back off; SlowDown as back-pressure; equal batches per rank, on real gloo ranks;
resume, twice; bad input."""

import pytest

EXERCISE = "ex15_exactly_once"
# One S3 server for the session, announced to every check. The exercise's only worker processes are the real-ranks
# check's gloo ranks, so that check alone is marked `starts_processes` (graded under spawn too by `make test`): the
# other checks run threads (the plan check's two processes are new interpreters, whatever the start method).
pytestmark = pytest.mark.usefixtures("s3_server")


@pytest.mark.step(1, "exactly once under faults")
def test_cut_bodies_resume_from_where_they_stopped(grade):
    """read_object over objects and byte ranges with 503 SlowDown answers and cut bodies: the exact bytes; each cut
    body resumed by a Range request from the first byte not received (the proxy sent each object's bytes once, not
    more); from a server that ignores Range, an error or the right bytes."""
    grade()


@pytest.mark.step(1, "exactly once under faults")
def test_retries_back_off_with_jitter_within_the_budget(grade):
    """Every request answered 503 SlowDown, with max_attempts 3 and 5: exactly max_attempts attempts per call, waits
    within min(max_delay_s, base_delay_s x 2^(n-1)), growing with n and jittered, calls from 4 threads not in step;
    then an error naming the key. A server that closes every connection: max_attempts connections. Every body cut
    after some of its bytes: still at most max_attempts GETs, then an error."""
    grade()


@pytest.mark.step(1, "exactly once under faults")
def test_stalled_bodies_are_abandoned_after_the_read_timeout(grade):
    """Bodies that stop sending without closing (for 3.5 s, then closed), read with read_timeout_s 0.25 s and 1.5 s:
    the next request comes no sooner than read_timeout_s after the stalled one and at most 0.75 s later, and the
    bytes are exact, resumed from the first byte not received."""
    grade()


@pytest.mark.step(2, "503 is back-pressure")
def test_slowdowns_lower_the_rate(grade):
    """read_objects at 16 in flight on one prefix limited to 20 GET/s: from 1 s after the first SlowDown the request
    rate stays within 2.5x the limit, with every object in order; and without faults, answers arriving out of order:
    every object in order, at most max_in_flight requests open."""
    grade()


@pytest.mark.step(2, "503 is back-pressure")
def test_the_rate_recovers_once_the_limit_lifts(grade):
    """read_objects at 16 in flight on one prefix limited to 20 GET/s for 3 s, then the limit lifted: within 3 s of
    the lift the request rate climbs back above 2.5x the old limit over some 0.5 s."""
    grade()


@pytest.mark.step(3, "equal batches per rank")
def test_ranks_get_equal_batches_and_every_sample(grade):
    """RemoteEpochs on 2, 3 and 4 ranks with 1 and 2 reader threads, over shards that do not divide (one rank with no
    whole shard): the same number of batches on every rank, len() equal to it, every sample at least once, only the
    fewest repeats; each sample's data bytes and its label an int."""
    grade()


@pytest.mark.step(3, "equal batches per rank")
def test_order_follows_seed_and_epoch(grade):
    """The same (seed, epoch) gives the same order with another num_workers and another instance; another epoch or
    another seed, another order."""
    grade()


@pytest.mark.step(3, "equal batches per rank")
def test_every_sample_exactly_once_under_flaky(grade):
    """One rank under `flaky`'s faults (its SlowDown and cut-body rates and seed; its latency and bandwidth only cost
    time): every sample of the epoch once, in the fault-free order, with at most 1.3x the fault-free epoch's requests
    and at most num_workers requests open."""
    grade()


@pytest.mark.step(3, "equal batches per rank")
def test_a_read_failing_past_every_attempt_raises(grade):
    """Every request refused after the first batch (RemoteEpochs, 2 reader threads) or the first object
    (read_objects, 4 in flight): the iteration raises within 30 s an error naming a shard (a key), never ends short
    in silence, and makes at most max_attempts GETs of any request."""
    grade()


@pytest.mark.step(3, "equal batches per rank")
def test_plan_is_the_same_in_every_process(grade):
    """Two processes of their own, started with other hash seeds, plan every rank's batches of an epoch: the same
    batches as the grading process."""
    grade()


@pytest.mark.step(3, "equal batches per rank")
@pytest.mark.starts_processes
def test_real_ranks_never_wait_for_a_missing_batch(grade):
    """3 gloo ranks on 127.0.0.1, each running an all_reduce after every batch: every rank returns, with the same
    number of batches, and together they yield every sample."""
    grade()


@pytest.mark.step(4, "resume, twice")
def test_resumes_twice_with_exactly_the_rest(grade):
    """An epoch stopped, its state through json, resumed (another num_workers), stopped and resumed again: exactly the
    uninterrupted epoch's batches, nothing twice, nothing missing; a state saved after the last batch resumes to an
    empty rest."""
    grade()


@pytest.mark.step(4, "resume, twice")
def test_resume_reads_only_what_is_left(grade):
    """Each resume's bytes (the proxy's count) at most 10% over the remaining samples' own."""
    grade()


@pytest.mark.step(5, "bad input")
def test_store_errors_name_what_and_where(grade):
    """A wrong secret, a missing bucket, a missing key, no server: each raises within 20 s an error naming the bucket
    or key and the endpoint's URL; a 403 or 404 is not retried."""
    grade()


@pytest.mark.step(5, "bad input")
def test_foreign_states_are_refused_unchanged(grade):
    """load_state_dict of another index's state, another epoch's and malformed ones: ValueError naming what does not
    match, and the loader goes on as before."""
    grade()
