"""Exercise 17: exactly once on top of tf.data service, graded in steps: decode elsewhere (request_epoch, run here
with distribute recorded and handed back); split to ranks (rank_plan against the rule); exactly once (exactly_once
against scripted services that lose, repeat, fall silent, hold back); on the real service (the course's trainer with
two ranks, a dispatcher and two workers in the course's sandbox, loopback only, skipped with the reason where none can
be made: no fault, a worker killed and started again, a worker killed for good); bad input."""

import pytest

EXERCISE = "ex17_exactly_once_service"


@pytest.mark.step(1, "decode elsewhere")
def test_request_epoch_registers_a_new_dynamic_job(grade):
    """request_epoch over 7 and then 10 samples calls tf.data.experimental.service.distribute once each (recorded, no
    service contacted): processing_mode ShardingPolicy.DYNAMIC, the service given, no job_name shared by the two
    calls, applied to a dataset of (int64 keys, int64 labels, uint8 (n, 224, 224, 3) crops): decoded before it."""
    grade()


@pytest.mark.step(1, "decode elsewhere")
def test_request_epoch_delivers_the_right_crops(grade):
    """With distribute handing the dataset back, request_epoch's dataset run here for keys out of order and apart
    (batches of 3), ten keys in batches of 5 with labels given 100 above the folder's, three keys in batches of 8,
    two in batches of 1, and one file of every kind of the train split (progressive, CMYK, grayscale, a PNG named
    .jpg, ...) in batches of 4: the keys in the order given, batches of batch_size with the last one short, the
    labels given, uint8 crops within the course's tolerance of the reference."""
    grade()


@pytest.mark.step(2, "split to ranks")
def test_rank_plan_gives_every_world_size_th_key(grade):
    """For 17, 23, 30 and 5 samples, world sizes 1, 2, 3 and 5, batch sizes 1 (where the split is even), 3, 4 and 8:
    every rank's keys are rank, rank + world_size, ... below num_samples, a list of ints."""
    grade()


@pytest.mark.step(2, "split to ranks")
def test_every_rank_gets_as_many_batches(grade):
    """On the same grid: every rank ceil(ceil(N / W) / B) batches, its keys spread over them as evenly as possible,
    the larger first."""
    grade()


@pytest.mark.step(3, "exactly once")
def test_lost_samples_are_asked_for_again(grade):
    """A first job that ends without 5 keys scattered over 40 (and without the last 8 of 23): every key once, in the
    plan's batches, and the second request asks for exactly the keys that were missing."""
    grade()


@pytest.mark.step(3, "exactly once")
def test_duplicates_are_dropped(grade):
    """A job that sends the first half of its keys a second time (a restarted worker's shard), over 40 keys in batches
    of 8 and 17 in batches of 4: every key once."""
    grade()


@pytest.mark.step(3, "exactly once")
def test_batches_follow_the_plan_and_keep_samples_whole(grade):
    """Jobs whose batches (of 7, 1 and 4) are not the plan's (of 4, 3 and 9), in an order of their own: the plan's
    batch sizes, numpy arrays, each row's label and image the ones that came with its key, the keys in the order
    they arrived."""
    grade()


@pytest.mark.step(3, "exactly once")
def test_a_silent_job_is_given_up_after_the_deadline(grade):
    """A job sending a batch every 0.6 x the deadline, longer in all than the deadline, is not given up; a job that
    falls silent after two batches is: the next request comes between 1 s (batch_timeout_s) and 1 s more after its
    last batch; again with batch_timeout_s None, which means BATCH_TIMEOUT_S (from 3 s to 30 s)."""
    grade()


@pytest.mark.step(3, "exactly once")
def test_batches_are_yielded_as_they_arrive(grade):
    """A job sends its first 6 keys and waits, up to 5 s, for the first batch to be yielded before sending the rest:
    it is."""
    grade()


@pytest.mark.step(3, "exactly once")
def test_closing_early_stops_the_job(grade):
    """A job of 200 batches, one every 20 ms, read by a loop that breaks after its first batch: 1 s after the break,
    no more batches are pulled from the job."""
    grade()


@pytest.mark.step(4, "on the real service")
@pytest.mark.sandbox_only
@pytest.mark.timeout_s(420)
def test_served_epochs_deliver_every_sample_once(grade):
    """The course's trainer with two ranks reads three epochs from a dispatcher and two workers in the sandbox (its
    only interface loopback): 192 samples with no fault, the trainer's CPU per image at most 0.5 of decoding the same
    images itself; 240 samples with worker 0 SIGKILLed after 48 and started again; 120 with it SIGKILLed and not
    started again. In each, every rank receives every key of its plan once, in its plan's batch sizes, with the right
    labels, uint8 crops and pixels (every 7th key). The dispatcher's listener is seen on loopback, the only interface,
    and no process of the sandbox is left once it ends."""
    grade()


@pytest.mark.step(5, "bad input")
def test_bad_arguments_are_refused(grade):
    """ValueError from rank_plan for world size 0, rank 2 of 2, rank -1, batch size 0, 1 sample on 2 ranks and 17
    samples on 2 ranks in batches of 1; from
    exactly_once for a key twice, sizes that add up to too few, a size of 0, batch_timeout_s 0 and -1; from
    request_epoch for 2 labels or 2 keys for 3 paths and batch size 0."""
    grade()


@pytest.mark.step(5, "bad input")
def test_a_service_that_never_answers_is_reported(grade):
    """Jobs that send nothing, with batch_timeout_s 1 s and 2 s: TimeoutError from the deadline to 1 s after it,
    naming how many keys are missing and the deadline."""
    grade()


@pytest.mark.step(5, "bad input")
def test_a_failing_job_is_reported(grade):
    """A job that raises after its first batch: its error comes out of exactly_once, and request is not called again;
    a job that sends key 999, not asked for: ValueError naming it."""
    grade()
