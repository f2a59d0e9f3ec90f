"""Exercise 07: a tf.data pipeline. Correctness first (content, order, shuffling, augmentation, errors); then two timed targets."""

import pytest

EXERCISE = "ex07_tfdata_pipeline"


def test_eval_pipeline_matches_reference(grade):
    """training=False: every file once, in sorted order, with its class index as an integer label, pixels within a mean
    |difference| of 3.0 of reference_crop, batches of batch_size with the last partial batch kept."""
    grade()


def test_drop_remainder_only_when_asked(grade):
    """drop_remainder=True gives only full batches, with a static batch dimension."""
    grade()


def test_every_file_once_per_training_epoch(grade):
    """training=True: each epoch holds every file exactly once, with its label, as its eval crop flipped or not."""
    grade()


def test_order_differs_between_epochs(grade):
    """training=True: three epochs of one pipeline come in three different orders (shuffle after cache)."""
    grade()


def test_training_order_is_well_shuffled(grade):
    """training=True: an epoch's order is unrelated to the file order (|rank correlation| < 0.5): a full-size shuffle buffer."""
    grade()


@pytest.mark.timeout_s(180)
def test_same_seed_same_orders(grade):
    """Two pipelines built with the same seed give the same sequence of epoch orders; another seed gives others."""
    grade()


def test_augmentations_differ_between_epochs(grade):
    """training=True: about half the images are flipped, and the flips change between epochs (augment after cache)."""
    grade()


def test_bad_input_is_reported(grade):
    """A missing folder, an empty class folder and a truncated JPEG each raise an error; none is skipped silently."""
    grade()


@pytest.mark.throughput
@pytest.mark.timeout_s(180)
def test_first_epoch_beats_naive(grade):
    """A first eval epoch (empty cache) feeding an emulated training step as long as the naive load of a batch: at least
    1.25x the naive pipeline (one element at a time, nothing running ahead), which only overlap can give."""
    grade()


@pytest.mark.throughput
@pytest.mark.timeout_s(180)
def test_cached_epoch_is_fast(grade):
    """A later epoch of the same pipeline replays the cache: at least 10x the naive pipeline."""
    grade()
