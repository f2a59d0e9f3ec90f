"""Exercise 03: processes, in graded steps. Correctness first (order, shared memory, seeding, errors and deaths,
clean shutdown); then two timed targets."""

import pytest

EXERCISE = "ex03_process_loader"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`

ORDER = (1, "batches in order")
SHARED_MEMORY = (2, "shared memory")
SEEDING = (3, "seeding")
ERRORS = (4, "errors and deaths")
SHUTDOWN = (5, "clean shutdown")
SPEED = (6, "speed")


@pytest.mark.step(*ORDER)
def test_batches_match_sequential_reference(grade):
    """Batches hold exactly the transformed reference crops of a sequential run, in sample order, the last partial batch kept."""
    grade()


@pytest.mark.step(*ORDER)
def test_same_batches_for_any_worker_count(grade):
    """num_workers=1, 2 and 3 give the same batches, pixel for pixel."""
    grade()


@pytest.mark.step(*ORDER)
def test_every_argument_at_every_value(grade):
    """The same batches with batch_size=1, a batch size that does not divide the epoch, one as large as the epoch or
    larger, more workers than batches, and prefetch=1, 3 and 4."""
    grade()


@pytest.mark.step(*ORDER)
def test_work_runs_in_worker_processes(grade):
    """The transform runs in several worker processes, never in the parent."""
    grade()


@pytest.mark.step(*ORDER)
@pytest.mark.timeout_s(150)
@pytest.mark.spawn_case_of_its_own
def test_works_under_spawn(grade):
    """start_method="spawn" gives the same batches as the sequential reference."""
    grade()


@pytest.mark.step(*SHARED_MEMORY)
def test_pixels_travel_through_shared_memory(grade):
    """Pixels reach the parent through shared-memory segments: what it receives through pipes and queues is at most
    5% of the pixel bytes."""
    grade()


@pytest.mark.step(*SHARED_MEMORY)
def test_returned_batches_stay_unchanged(grade):
    """A returned batch never changes afterwards: later batches and close() leave it as it was."""
    grade()


@pytest.mark.step(*SHARED_MEMORY)
def test_two_loaders_at_once(grade):
    """Two loaders alive at once and iterated in turn each give their own right batches (no fixed names, no shared state)."""
    grade()


@pytest.mark.step(*SEEDING)
def test_augmentations_differ_between_samples(grade):
    """Every sample gets its own random draw, from np.random.default_rng([seed, epoch, i]): workers do not repeat
    each other's augmentations."""
    grade()


@pytest.mark.step(*SEEDING)
def test_augmentations_change_every_epoch(grade):
    """epoch=0 and epoch=1 give every sample different draws; the same seed and epoch give the same draws again."""
    grade()


@pytest.mark.step(*ERRORS)
def test_worker_error_reaches_the_parent(grade):
    """A transform that raises in a worker makes next() raise in the parent, with the worker's type name and message;
    the batches before it are right and in order, none at or after it is returned."""
    grade()


@pytest.mark.step(*ERRORS)
@pytest.mark.timeout_s(90)
def test_dead_worker_is_reported(grade):
    """A worker killed mid-epoch is reported by an exception within seconds that says the worker died, never a hang."""
    grade()


@pytest.mark.step(*ERRORS)
@pytest.mark.timeout_s(150)
def test_timeout_s_bounds_each_wait(grade):
    """A slow but steady epoch longer than timeout_s runs to the end; a stuck (alive, silent) worker raises
    TimeoutError about timeout_s later."""
    grade()


@pytest.mark.step(*SHUTDOWN)
def test_close_leaves_nothing_behind(grade):
    """close() (twice), a with block, and iterating to the end leave no process and no /dev/shm segment."""
    grade()


@pytest.mark.step(*SHUTDOWN)
def test_close_stops_a_busy_worker(grade):
    """close() returns within seconds while a worker is busy on a 120-second sample, and leaves nothing behind."""
    grade()


@pytest.mark.step(*SPEED)
@pytest.mark.throughput
@pytest.mark.timeout_s(240)
def test_processes_beat_the_gil(grade):
    """A GIL-holding transform: one worker per usable core must be faster than one process by a share
    (`GIL_TARGET_SHARE`, in the checks module) of the gain a plain multiprocessing pool gets in the same rounds; on a
    one-core machine, or where that pool gains too little to tell parallel from single, the target is skipped, and
    says why."""
    grade()


@pytest.mark.step(*SPEED)
@pytest.mark.throughput
@pytest.mark.timeout_s(240)
def test_beats_a_naive_float32_pool(grade):
    """Decode and crop only: the loader (uint8 through shared memory) must be `POOL_TARGET` times as fast as `Pool.map`
    returning normalised float32 images (each 600 KB, pickled back), with the same number of workers (a flat target:
    scaled by the free cores, it let a planted pool pass)."""
    grade()
