"""Exercise 07: a tf.data pipeline. Correctness first, step by step (one file; every file in order, cached and
batched; the shuffle; the flip; bad input); then two timed targets."""

import pytest

EXERCISE = "ex07_tfdata_pipeline"


@pytest.mark.step(1, "read and label")
def test_one_file_gives_its_crop_and_label(grade):
    """load_and_label in a tf.data map: a uint8 (224, 224, 3) crop within a mean |difference| of 3.0 of reference_crop and
    an int64 scalar label, the index of the file's folder among the class names; a folder not among them raises."""
    grade()


@pytest.mark.step(2, "cache and batch")
def test_eval_pipeline_matches_reference(grade):
    """training=False: every file once, in list_samples order, with its class index as an int64 label, pixels within a
    mean |difference| of 3.0 of reference_crop for every training image of ci (200 spread evenly on larger profiles),
    batches of 32 with the last partial batch kept."""
    grade()


@pytest.mark.step(2, "cache and batch")
def test_batch_sizes_at_the_edges(grade):
    """training=False, root given as a str: batch_size 1, a divisor of the file count, and more than the file count all
    give every file once in order; with drop_remainder=True and batches larger than the data, no batch at all."""
    grade()


@pytest.mark.step(2, "cache and batch")
def test_drop_remainder_only_when_asked(grade):
    """drop_remainder=True gives only full batches, with a static batch dimension."""
    grade()


@pytest.mark.step(2, "cache and batch")
def test_later_epochs_replay_the_cache(grade):
    """A second epoch of the same pipeline gives the same batches after the files were removed: it neither reads nor
    decodes a file again."""
    grade()


@pytest.mark.step(3, "shuffle per epoch")
def test_every_file_once_per_training_epoch(grade):
    """training=True: each epoch holds every file exactly once, with its label, as its eval crop flipped or not, in
    batches of batch_size with the last partial batch kept."""
    grade()


@pytest.mark.step(3, "shuffle per epoch")
def test_order_differs_between_epochs(grade):
    """training=True: three epochs of one pipeline come in three different orders (shuffle after cache)."""
    grade()


@pytest.mark.step(3, "shuffle per epoch")
def test_training_order_is_well_shuffled(grade):
    """training=True: an epoch's order is a shuffle of the samples, unrelated to the file order: |rank correlation| < 0.5
    and fewer than 20% of the file order's neighbours still side by side (a shuffle of whole batches keeps most)."""
    grade()


@pytest.mark.step(3, "shuffle per epoch")
@pytest.mark.timeout_s(180)
def test_same_seed_same_orders(grade):
    """Two pipelines built with the same seed give the same sequence of epoch orders; another seed gives others."""
    grade()


@pytest.mark.step(4, "flip per image")
def test_each_image_flipped_on_its_own(grade):
    """training=True: 20-80% of the images flipped each epoch, and most batches hold flipped and unflipped images (each
    image its own draw, never a whole batch together)."""
    grade()


@pytest.mark.step(4, "flip per image")
def test_augmentations_differ_between_epochs(grade):
    """training=True: at least a fifth of the images change flip between two epochs (augment after cache), and the flips
    by position differ too (draws that do not restart each epoch)."""
    grade()


@pytest.mark.step(5, "bad input")
def test_bad_input_is_reported(grade):
    """A missing folder and an empty class folder each raise an error naming the folder; a truncated, empty, not-JPEG or
    bad-header file each raise an error; none is skipped silently."""
    grade()


@pytest.mark.step(6, "speed")
@pytest.mark.throughput
@pytest.mark.timeout_s(180)
def test_first_epoch_beats_naive(grade):
    """On one tf.data thread, a first eval epoch (empty cache) feeding an emulated training step as long as the naive load
    of a batch: at least 1.25x the naive pipeline (one element at a time, nothing running ahead), which only overlap can
    give."""
    grade()


@pytest.mark.step(6, "speed")
@pytest.mark.throughput
@pytest.mark.timeout_s(180)
def test_cached_epoch_is_fast(grade):
    """On one tf.data thread, a later epoch of the same pipeline replays the cache: at least 3x the naive pipeline."""
    grade()
