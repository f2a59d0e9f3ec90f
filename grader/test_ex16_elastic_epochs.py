"""Exercise 16: an elastic epoch under torchrun, graded in steps: the plan (the world read when called, the order,
the steps by the one rule, the position after them); a rank killed (the state as plain data, a checkpoint's round
trip, a save SIGKILLed mid-write); a node lost (the rest split again over another number of ranks); under torchrun
(the call join makes, then real torchrun jobs of two nodes on this machine, loopback only, in the course's sandbox,
skipped with the reason where none can be made: every sample once, a rank killed, a node lost, a hung rank); bad
input."""

import pytest

EXERCISE = "ex16_elastic_epochs"


@pytest.mark.step(1, "the plan")
def test_world_is_read_when_called(grade):
    """The module imported again while the environment holds rank 0 of 1, then world_from_environment() called with
    rank 3 of 4 (local rank 1), rank 1 of 2 after 2 restarts, rank 0 of 1 and rank 3 of 4 again: each call gives
    the World of the environment at that moment."""
    grade()


@pytest.mark.step(1, "the plan")
def test_order_follows_seed_and_epoch(grade):
    """order() is a permutation of range(30) as a list of ints; the same from another plan with the same seed and
    epoch (and another batch size and dataset); another for the epoch after, the epoch before, the next seed, and
    the next seed with the epoch before (the same seed + epoch)."""
    grade()


@pytest.mark.step(1, "the plan")
def test_steps_split_the_epoch(grade):
    """For 23, 30 and 0 samples, batch sizes 1, 3 and 4, world sizes 1, 2, 3 and 5, from the epoch's start, from the
    middle position this world size reaches (a multiple of W x B) and from the end: every rank's steps are the
    rule's (the step count, (step, rank) order reading order[start:], B per rank for a full block, the last block's
    parts differing by at most one, the larger first)."""
    grade()


@pytest.mark.step(1, "the plan")
def test_position_after_agrees_with_steps(grade):
    """On the same grid, from the start, the middle, the last sample and the end, after every number of steps that
    remain: position_after is the position that follows the samples of those steps (the end after the short last
    one)."""
    grade()


@pytest.mark.step(2, "a rank killed")
def test_state_is_plain_data_and_resumes(grade):
    """state_dict at positions 0, 1, 13, 29 and 30 of 30 survives json.dumps and json.loads, and position_from gives
    the position back, also on a plan with batch size 3; a state is a new dict each call, and holds the position."""
    grade()


@pytest.mark.step(2, "a rank killed")
def test_checkpoint_round_trips(grade):
    """load_checkpoint gives None where there is no file (nor folder); a checkpoint of a model's and an SGD-with-
    momentum optimizer's state dicts, a loader's state and plain data comes back equal (tensors by dtype, shape and
    values), also saved over an earlier one, and a new optimizer loads its state; a completed save leaves nothing
    beside the checkpoint."""
    grade()


@pytest.mark.step(2, "a rank killed")
def test_checkpoint_survives_a_kill_mid_write(grade):
    """A spawn-started process saves a checkpoint, then a second one that stalls while it is pickled; SIGKILLed
    there, it leaves the first checkpoint whole at the path. Another saves a checkpoint, then a large one, and is
    SIGKILLed the moment the path changes: the path holds the first checkpoint whole, or the new one whole."""
    grade()


@pytest.mark.step(3, "a node lost")
def test_rest_is_split_again_on_another_world_size(grade):
    """From positions a world size does not reach itself (the middle, the last sample), for 23 and 30 samples on the
    step-1 grid: the rule's step count on every rank, (step, rank) order reading order[start:], B per rank for a
    full block. And 1, 2 or 3 steps of 30 samples on 2 ranks, then the rest on 1 rank, on 3 ranks, and on 3 ranks
    with batch size 3: every sample once, in the epoch's order, the same step count on every rank."""
    grade()


@pytest.mark.step(4, "under torchrun")
def test_join_uses_gloo_and_the_step_timeout(grade):
    """STEP_TIMEOUT_S lies from 5 s to 60 s; join(rank 1 of 3) and join(rank 0 of 2), in an environment that says
    rank 0 of 1, call init_process_group once each (recorded, not run): gloo, env://, the world's rank and size,
    timeout=timedelta(seconds=STEP_TIMEOUT_S)."""
    grade()


@pytest.mark.step(4, "under torchrun")
@pytest.mark.sandbox_only
@pytest.mark.timeout_s(240)
def test_trains_every_sample_once_under_torchrun(grade):
    """A torchrun job of two nodes (one rank each) over 45 samples in batches of 4: one attempt whose two ranks finish
    the epoch with equal step counts, and the steps, read in (step, rank) order, are the epoch's order, each sample
    once."""
    grade()


@pytest.mark.step(4, "under torchrun")
@pytest.mark.sandbox_only
@pytest.mark.timeout_s(240)
def test_a_killed_rank_costs_no_sample(grade):
    """A torchrun job of two nodes over 60 samples in batches of 3, a checkpoint every 2 steps; rank 1 SIGKILLed as it
    begins step 6. torchrun restarts both ranks; they resume from the last checkpoint the first attempt committed,
    and over the steps that count (each attempt's up to the checkpoint the next one loaded) every sample is trained
    once, in the epoch's order, with equal step counts in each attempt."""
    grade()


@pytest.mark.step(4, "under torchrun")
@pytest.mark.sandbox_only
@pytest.mark.timeout_s(240)
def test_a_lost_node_leaves_the_rest_to_the_others(grade):
    """A torchrun job of two nodes (--nnodes=1:2) over 50 samples in batches of 3 loses node 1 (its agent and rank
    SIGKILLed together) at step 5: the job goes on on 1 rank and, over the steps that count, trains every sample
    once, in the epoch's order."""
    grade()


@pytest.mark.step(4, "under torchrun")
@pytest.mark.sandbox_only
@pytest.mark.timeout_s(240)
def test_a_hung_rank_is_given_up_within_the_timeout(grade):
    """In a torchrun job of two nodes, rank 1 stops for good as it begins step 4: within STEP_TIMEOUT_S and 25 s for
    torchrun's restart, the restarted ranks begin, and the job ends with every sample trained once, in order."""
    grade()


@pytest.mark.step(5, "bad input")
def test_bad_environment_is_refused(grade):
    """world_from_environment raises ValueError naming the variable for each of the four missing, 'two', '1.5' or
    empty; and ValueError for rank 2 of 2, rank -1, world size 0 and local rank -1."""
    grade()


@pytest.mark.step(5, "bad input")
def test_bad_arguments_are_refused(grade):
    """ValueError for EpochPlan with -1 samples, batch size 0 or -1, epoch -1; steps from -1 or past the end, rank
    -1 or 2 of 2, world size 0; position_after from -1 or past the end, -1 steps, more steps than remain, world size
    0."""
    grade()


@pytest.mark.step(5, "bad input")
def test_bad_state_is_refused(grade):
    """position_from raises ValueError, saying what does not match, for a state of another epoch, seed, dataset
    (named) or num_samples (named); for the state without any one of its keys; with any value as a bool, a float
    or a str (an int field) or as an int or None (a str field); with the position at -1 or past the end; for None
    and a list."""
    grade()


@pytest.mark.step(5, "bad input")
def test_bad_checkpoint_is_refused(grade):
    """load_checkpoint raises ValueError naming the path for a file of garbage, an empty file, a truncated
    checkpoint, a torch-saved list and a pickled list, and leaves each file as it was; and for a checkpoint written by
    torch.save or pickle whose pickle names a function to call (os.mkdir), without calling it."""
    grade()
