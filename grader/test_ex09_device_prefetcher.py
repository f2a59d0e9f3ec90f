"""Exercise 09: a device prefetcher. Correctness first, on every machine (the values, what crosses the bus, the
look-ahead, errors and close, and the CUDA branch run against a CPU stand-in of CUDA); then, with a CUDA GPU only,
stream hygiene and the timed overlap (skipped, with the reason, elsewhere)."""

import pytest

EXERCISE = "ex09_device_prefetcher"


@pytest.mark.step(1, "normalise on the device")
def test_batches_match_direct_normalisation(grade):
    """Every batch once, in order, the last partial one kept; images float32 on the device, bit-identical to
    images.to(device).float().div(255).sub(mean).div(std) (channels_last when asked); labels int64, unchanged."""
    grade()


@pytest.mark.step(1, "normalise on the device")
def test_copies_uint8_and_converts_on_the_device(grade):
    """What crosses .to(device) is the loader's uint8 batch: nothing is converted to float on the host."""
    grade()


@pytest.mark.step(2, "look ahead, errors, close")
def test_next_copy_is_issued_before_handing_over(grade):
    """With depth 1, 2 and 3: when batch k is handed over, exactly batches up to k+depth-1 are taken and sent (fewer
    at the loader's end), none more."""
    grade()


@pytest.mark.step(2, "look ahead, errors, close")
def test_loader_errors_surface_and_close_stops_it(grade):
    """The loader's exception reaches the caller after the batches before it; close() closes the loader's iterator
    and a DataLoader's workers stop."""
    grade()


@pytest.mark.step(3, "the CUDA branch, on a CPU stand-in")
def test_cuda_branch_runs_on_a_cpu_stand_in(grade):
    """On every machine: the CUDA branch, run against a CPU stand-in of torch.cuda (streams, events, pinned and
    non_blocking copies, record_stream), calls only what torch has, as it takes it, and hands over every batch as the
    contract's normalisation gives it (device 'cuda' and torch.device('cuda'), depth 2 and 3, batches arriving pinned
    or not). Whether the copies overlap, race or outlive their readers needs a GPU (steps 4 and 5)."""
    grade()


@pytest.mark.step(4, "streams (CUDA only)")
@pytest.mark.cuda_only
def test_copies_are_asynchronous_from_pinned_memory(grade):
    """CUDA: every copy comes from pinned memory, with non_blocking=True, on a stream other than the caller's."""
    grade()


@pytest.mark.step(4, "streams (CUDA only)")
@pytest.mark.cuda_only
def test_no_race_under_cuda_sanitizer(grade):
    """CUDA: PyTorch's CUDA sanitizer finds no unsynchronised access between the side stream and the caller's."""
    grade()


@pytest.mark.step(4, "streams (CUDA only)")
@pytest.mark.cuda_only
def test_buffers_outlive_the_compute_that_reads_them(grade):
    """CUDA: a batch dropped while the caller's kernels on it are still queued is not overwritten by the next copy."""
    grade()


@pytest.mark.step(5, "speed (CUDA only)")
@pytest.mark.throughput
@pytest.mark.timeout_s(300)
@pytest.mark.cuda_only
def test_overlap_beats_copy_then_compute(grade):
    """CUDA: with a step as long as one batch's copy and conversion, the prefetcher gives at least 1.5x the images/s
    of copying and converting each batch, then computing (a perfect overlap of its 12 batches is 2N / (N + 1) = 1.85x)."""
    grade()
