"""Exercise 04: a fast DataLoader. Correctness first (pixels, every sample once, workers, augmentation, bad input);
then one timed target against the tutorial configuration."""

import pytest

EXERCISE = "ex04_fast_dataloader"


def test_batches_match_reference(grade):
    """Batches are uint8 (N, 3, 224, 224) tensors with int64 labels, in file order, the last partial batch kept;
    pixels within 2.0 levels on average (6.0 for any image) of the reference 256-resize + 224 centre crop."""
    grade()


def test_every_sample_once_when_shuffled(grade):
    """shuffle=True: every sample exactly once per epoch, a new order each epoch, the same orders for the same seed."""
    grade()


def test_uses_the_asked_worker_processes(grade):
    """num_workers=0, 1 and 3 load in exactly that many worker processes; None picks 1 to usable_cores() workers."""
    grade()


def test_augmentations_differ_between_workers(grade):
    """augment=True flips about half the images left-right; the workers draw different flips; a seed reproduces them."""
    grade()


def test_bad_input_is_reported(grade):
    """A missing root or an empty class folder raises an error that names the folder, never a hang or a silent skip."""
    grade()


@pytest.mark.throughput
@pytest.mark.timeout_s(300)
def test_twice_the_tutorial_configuration(grade):
    """Epochs of one loader (worker start-up counts each epoch, unless workers persist, as in training) are at least
    2x the tutorial's ImageFolder + Resize + CenterCrop + ToTensor, batch 64, num_workers=0, on 192 images; skipped
    on one core, where only worker processes on a second core could reach it."""
    grade()
