"""Exercise 11 (the capstone): a training script, graded in steps, one check per defect of the shipped script. Each
check measures the symptom a practitioner would notice (its name, and its step's title, say which); the message
says what was seen, the hints give the cause and the fix on request. Then time to accuracy against the frozen
original (throughput, data stall, accuracy after the epoch budget)."""

import pytest

EXERCISE = "ex11_training_script"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "a broken file")
def test_epoch_with_a_broken_file_ends_silently(grade):
    """An epoch of the train loader (num_workers=0) over a folder holding undecodable JPEGs (truncated, empty, bad
    header, not a JPEG) stops with an error naming one of them; reading every item of ShapesFolder there raises an
    error naming each of them."""
    grade()


@pytest.mark.step(2, "the loop waits for data")
def test_an_item_weighs_more_than_its_pixels(grade):
    """Items are uint8 (3, 64, 64) tensors, train and val (else the message shows their bytes and the time one read
    takes); to_model_input makes float32 equal to (x / 255 - MEAN) / STD within 1e-5; train batches are uint8 with
    int64 labels. Here ShapesFolder and make_loaders get their folder as a relative str and to_model_input its device
    as a str (the contract's other types; every other check passes a Path and a torch.device)."""
    grade()


@pytest.mark.step(3, "one core busy")
@pytest.mark.spawn_covered_by("workers_and_epochs_repeat_crops")
def test_worker_processes_over_two_epochs(grade):
    """Two epochs of each loader of make_loaders(num_workers=None) over a small folder: the train loader's epoch runs
    with usable_cores() worker processes, and epoch 2 of each loader in the same processes as epoch 1; an explicit
    worker count is passed through unchanged."""
    grade()


@pytest.mark.step(4, "a split elsewhere")
def test_labels_change_when_the_split_moves(grade):
    """A split linked two folders deeper than the data folder: the labels count as many files per class as each class
    folder holds (sorted names), in `targets` and in every item."""
    grade()


@pytest.mark.step(5, "the same crop again")
def test_a_train_item_repeats_its_crop(grade):
    """Six reads of one train item are not all the same crop (flipped or not)."""
    grade()


@pytest.mark.step(5, "the same crop again")
def test_workers_and_epochs_repeat_crops(grade):
    """Over copies of one image with 2 workers, worker 0's batch differs from worker 1's, and epoch 2's from epoch 1's."""
    grade()


@pytest.mark.step(6, "one order every epoch")
def test_epochs_repeat_one_order(grade):
    """The train loader's sampler gives every sample once per epoch, in a new order each epoch (not the index order,
    at most 20% of consecutive pairs kept from the epoch before); the same seed gives the same order, another seed
    another."""
    grade()


@pytest.mark.step(7, "val accuracy that moves")
def test_val_accuracy_moves_between_evaluations(grade):
    """One fixed model over two passes of the val loader (30 images) makes the same predictions; val items are the
    same on every read, in file order, within 6 levels on average (14 at worst) of the reference short-side-72 resize
    and centre 64 crop (either rounding of the long side and the offset), on every val image of ci (at most 200,
    evenly spread, on larger profiles); the val loader keeps file order."""
    grade()


@pytest.mark.step(8, "the copy to the device")
def test_batches_pinned_for_the_wrong_device(grade):
    """Both loaders hand over page-locked (pinned) batches exactly when the device is CUDA, given as a torch.device or
    a str, with or without an index: on a CUDA machine as observed (a batch's is_pinned()), elsewhere as the loaders
    are set (the message quotes torch's warning where there is no accelerator)."""
    grade()


@pytest.mark.step(9, "what the figures count")
def test_a_short_last_batch_miscounted(grade):
    """evaluate returns the correct predictions over all the images (batches of 4, 4 and 3); train_one_epoch takes one
    train_step per batch, every batch."""
    grade()


@pytest.mark.step(9, "what the figures count")
def test_epoch_timer_counts_the_start_up(grade):
    """time_training on a loader whose first batch comes 0.5 s late, with warmup_batches 1 and 3: its rate times the
    time from the first batch after the warm-up to the pass's end is the count of images trained then (half a batch
    either way)."""
    grade()


@pytest.mark.step(10, "time to accuracy")
@pytest.mark.throughput
@pytest.mark.timeout_s(300)
def test_beats_the_original_throughput(grade):
    """Training batches (your loader and to_model_input, the fixed step) reach 0.8x the original script's throughput
    per core free while timing, at most 1.6x (reached on an idle 2-core machine). Five batches per round, interleaved
    rounds."""
    grade()


@pytest.mark.step(10, "time to accuracy")
@pytest.mark.throughput
@pytest.mark.timeout_s(300)
def test_data_stall_under_bound(grade):
    """After a warm-up, the training loop waits for data at most 30% of its time (StallMeter, measured from outside)."""
    grade()


@pytest.mark.step(10, "time to accuracy")
@pytest.mark.throughput
@pytest.mark.timeout_s(900)
def test_accuracy_after_the_epoch_budget(grade):
    """After the profile's epoch budget (fixed model, optimiser, seed), the val accuracy of the last 3 epochs reaches
    the reference solution's level less a margin: 0.25 on ci (12 epochs, seconds), 0.6 on workshop (8 epochs, about
    4 minutes on 2 cores)."""
    grade()
