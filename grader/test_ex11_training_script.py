"""Exercise 11 (the capstone): a training script, graded in steps, one check per defect of the shipped script:
bad input; uint8 items normalised per batch; workers; labels; augmentation and order; device options and timing;
then time to accuracy against the frozen original (throughput, data stall, accuracy after the epoch budget)."""

import pytest

EXERCISE = "ex11_training_script"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "bad input")
def test_undecodable_image_raises_naming_the_file(grade):
    """ShapesFolder over a folder holding undecodable JPEGs (truncated, empty, bad header, not a JPEG) raises an error
    naming each file, and an epoch of the train loader (num_workers=0) stops at one, naming it."""
    grade()


@pytest.mark.step(2, "uint8 to the end")
def test_uint8_items_normalised_per_batch(grade):
    """Items are uint8 (3, 64, 64) tensors, train and val; train batches uint8 with int64 labels; to_model_input makes
    float32 equal to (x / 255 - MEAN) / STD within 1e-5."""
    grade()


@pytest.mark.step(3, "workers")
def test_train_loader_uses_workers(grade):
    """make_loaders(num_workers=None) gives the train loader usable_cores() worker processes, persistent (in the val
    loader too, where it has workers); an explicit count is passed through unchanged."""
    grade()


@pytest.mark.step(4, "labels")
def test_labels_follow_class_folders(grade):
    """A split linked two folders deeper than the data folder gets each file's class folder index (sorted names) as
    its label, in `targets` and in every item."""
    grade()


@pytest.mark.step(5, "augmentation and order")
def test_train_items_augmented_on_every_read(grade):
    """Six reads of one train item are not all the same crop (flipped or not)."""
    grade()


@pytest.mark.step(5, "augmentation and order")
def test_augmentation_differs_between_workers_and_epochs(grade):
    """Over copies of one image with 2 workers, worker 0's batch differs from worker 1's, and epoch 2's from epoch 1's."""
    grade()


@pytest.mark.step(5, "augmentation and order")
def test_epochs_are_new_permutations(grade):
    """The train loader's sampler gives every sample once per epoch, in a new order each epoch (not the file order,
    at most 20% of consecutive pairs kept from the epoch before); the same seed gives the same order, another seed
    another."""
    grade()


@pytest.mark.step(5, "augmentation and order")
def test_val_items_are_centre_crops(grade):
    """Val items are the same on every pass, in file order, within 6 levels on average (14 at worst) of the reference
    short-side-72 resize and centre 64 crop (either rounding of the long side and the offset), on every val image of
    ci (at most 200, evenly spread, on larger profiles); the val loader keeps file order."""
    grade()


@pytest.mark.step(6, "device options and timing")
def test_train_and_evaluate_cover_every_batch(grade):
    """evaluate returns the correct predictions over all the images (batches of 4, 4 and 3: not the mean of the
    batches' accuracies); train_one_epoch takes one train_step per batch, every batch."""
    grade()


@pytest.mark.step(6, "device options and timing")
def test_pin_memory_only_for_cuda(grade):
    """pin_memory is set on both loaders exactly when the device is CUDA, given as a torch.device or a str, with or
    without an index (loaders built, never iterated)."""
    grade()


@pytest.mark.step(6, "device options and timing")
def test_time_training_leaves_out_warmup(grade):
    """time_training on a loader whose first batch comes 0.5 s late, with warmup_batches 1 and 3: its rate times the
    time from the first batch after the warm-up to the pass's end is the count of images trained then (half a batch
    either way)."""
    grade()


@pytest.mark.step(7, "time to accuracy")
@pytest.mark.throughput
@pytest.mark.timeout_s(300)
def test_beats_the_original_throughput(grade):
    """Training batches (your loader and to_model_input, the fixed step) reach 0.8x the original script's throughput
    per core free while timing, at most 1.6x (reached on an idle 2-core machine). Five batches per round, interleaved
    rounds."""
    grade()


@pytest.mark.step(7, "time to accuracy")
@pytest.mark.throughput
@pytest.mark.timeout_s(300)
def test_data_stall_under_bound(grade):
    """After a warm-up, the training loop waits for data at most 30% of its time (StallMeter, measured from outside)."""
    grade()


@pytest.mark.step(7, "time to accuracy")
@pytest.mark.throughput
@pytest.mark.timeout_s(900)
def test_accuracy_after_the_epoch_budget(grade):
    """After the profile's epoch budget (fixed model, optimiser, seed), the val accuracy of the last 3 epochs reaches
    the reference solution's level less a margin: 0.25 on ci (12 epochs, seconds), 0.6 on workshop (8 epochs, about
    4 minutes on 2 cores)."""
    grade()
