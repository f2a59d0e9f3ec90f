"""Exercise 06: a class-balanced DataLoader, graded in steps: weights; balanced epochs (layout, labels, epoch length,
class frequencies, seeding); bad input; then it must keep up with a plain shuffled loader."""

import pytest

EXERCISE = "ex06_balanced_sampler"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "weights")
def test_sample_weights_are_per_sample(grade):
    """sample_weights gives one weight per sample, 1 / (samples in its class), so every class carries the same total;
    for any labels (not only 0..C-1, not only sorted), in a list or a tuple."""
    grade()


@pytest.mark.step(2, "balanced epochs")
@pytest.mark.spawn_covered_by("labels_match_the_images")
def test_batches_have_the_right_layout(grade):
    """Batches are (uint8 (N, 3, 224, 224), int64 (N,)) tensors; epoch_length=21, batch_size=4 gives 4, 4, 4, 4, 4, 1
    (and batch_size=5 gives 5, 5, 5, 5, 1, with split_dir a relative str); num_workers=None builds usable_cores()
    workers, 1 and 3 are kept."""
    grade()


@pytest.mark.step(2, "balanced epochs")
def test_labels_match_the_images(grade):
    """Each image is a sample's reference centre crop (mean |difference| at most 2 levels) and comes with that sample's label."""
    grade()


@pytest.mark.step(2, "balanced epochs")
def test_epoch_has_the_asked_length(grade):
    """An epoch draws exactly epoch_length samples (the dataset's size by default; shorter and longer than the
    dataset too, and 1, the shortest legal epoch): balance never drops samples."""
    grade()


@pytest.mark.step(2, "balanced epochs")
def test_class_frequencies_are_near_uniform(grade):
    """Over one long epoch (at least 20,000 draws), and over pooled epochs of the default length (as many draws),
    every class's frequency is within 4 standard deviations, sqrt(p(1-p)/n) with p = 1/C, of 1/C, and every sample
    is drawn."""
    grade()


@pytest.mark.step(2, "balanced epochs")
def test_same_seed_gives_the_same_epochs(grade):
    """Two loaders made with the same seed draw the same samples, epoch after epoch."""
    grade()


@pytest.mark.step(2, "balanced epochs")
def test_different_seeds_give_different_epochs(grade):
    """Two seeds draw different samples."""
    grade()


@pytest.mark.step(2, "balanced epochs")
def test_each_epoch_draws_anew(grade):
    """Two epochs of one loader draw different samples (the generator is seeded once, not every epoch)."""
    grade()


@pytest.mark.step(3, "bad input")
def test_bad_input_gets_a_clear_error(grade):
    """A missing folder raises an error naming it; epoch_length=0 or -3 raises ValueError. Nothing hangs."""
    grade()


@pytest.mark.step(4, "speed")
@pytest.mark.throughput
@pytest.mark.timeout_s(240)
def test_balanced_loader_keeps_up(grade):
    """With num_workers=None, at least 0.8x the throughput of a plain shuffled DataLoader over the same folder
    with one worker process per usable core (the same epoch length and batch size)."""
    grade()
