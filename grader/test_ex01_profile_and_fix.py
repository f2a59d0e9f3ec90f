"""Exercise 01: profile first, then a sequential loader that is right on clean data, then on dirty data, then faster;
then one crop that decodes only what it keeps."""

import pytest

EXERCISE = "ex01_profile_and_fix"

PROFILE = (1, "profile the stages")
CLEAN = (2, "right on clean data")
DIRTY = (3, "bad files reported")
SPEED = (4, "speed: cheap wins")
DECODE_LESS = (5, "decode less")


@pytest.mark.step(*PROFILE)
def test_profile_times_each_stage(grade):
    """profile_stages times each stage on a wall clock: known sleep costs come back at most 20% short and 30% long."""
    grade()


@pytest.mark.step(*PROFILE)
def test_profile_handles_any_pipeline(grade):
    """profile_stages takes any number of stages and any iterable of inputs, calls each stage once per input on the
    previous stage's output, and returns every stage name in stage order."""
    grade()


@pytest.mark.step(*PROFILE)
def test_bottleneck_is_named(grade):
    """find_bottleneck names the slowest stage, wherever it sits; on a tie, the first of the tied stages."""
    grade()


@pytest.mark.step(*CLEAN)
def test_batches_match_reference(grade):
    """load_batches gives uint8 (N, 224, 224, 3) centre crops equal to the reference (every training image of ci, 200
    spread evenly on larger profiles), labels in order, last batch kept."""
    grade()


@pytest.mark.step(*CLEAN)
def test_batch_sizes_at_the_edges(grade):
    """Batch sizes of 1, one that divides the sample count, one that does not, and one larger than it: all right."""
    grade()


@pytest.mark.step(*DIRTY)
def test_dirty_files_are_skipped_and_reported(grade):
    """On the dirty split, every broken file is skipped and reported once with a reason; the rest load in order."""
    grade()


@pytest.mark.step(*DIRTY)
def test_bad_files_anywhere(grade):
    """Broken files first, last, between batches and several in a row: each reported, batches full, none lost."""
    grade()


@pytest.mark.step(*DIRTY)
def test_logs_each_skip_without_a_list(grade):
    """With skipped=None (the default), each broken file is still skipped, and logged as a warning naming it."""
    grade()


@pytest.mark.step(*DIRTY)
def test_missing_file_raises(grade):
    """A path that does not exist raises FileNotFoundError instead of being skipped."""
    grade()


@pytest.mark.step(*SPEED)
def test_sequential_and_uncached(grade):
    """Each call decodes every file afresh, in the calling thread: no cache between calls, no threads or processes."""
    grade()


@pytest.mark.step(*SPEED)
@pytest.mark.throughput
def test_faster_than_naive(grade):
    """With the cheap wins, the sequential loader runs at least 1.5x the naive loop."""
    grade()


@pytest.mark.step(*DECODE_LESS)
@pytest.mark.timeout_s(300)
def test_decode_less_crop_matches_reference(grade):
    """decode_less_crop gives reference_crop within the course's plain tolerance (2.0 levels on average, 6.0 for any
    image) on every training image of ci, the images at each DCT scale's edge included; on a larger profile the mean
    over 200 spread evenly, and any image of those or of every image whose crop window is at least 2 x 224 px (about
    2,900 of workshop's 9,000); and on a PNG."""
    grade()


@pytest.mark.step(*DECODE_LESS)
def test_decode_less_crop_raises_on_broken_files(grade):
    """A file that does not decode (each kind of damage in the dirty split) raises one of DECODE_ERRORS."""
    grade()


@pytest.mark.step(*DECODE_LESS)
def test_decode_less_crop_reads_the_file_each_call(grade):
    """A file rewritten between two calls gives its new crop: no cache of decoded crops."""
    grade()


@pytest.mark.step(*DECODE_LESS)
@pytest.mark.throughput
def test_decode_less_crop_is_faster(grade):
    """decode_less_crop runs at least 1.75x reference_crop, both on one thread, on the same 64 files of ImageNet's size
    (crop window under 4 x 224 px)."""
    grade()
