"""Exercise 10: decoding on the device. Correctness first, on every machine (bytes from the shards, pixels, one decode
call per batch, crops kept where they were decoded on a CPU stand-in of CUDA, the loader, bad shards); then, with a
CUDA GPU only, the speed against CPU workers (skipped, with the reason, elsewhere)."""

import pytest

EXERCISE = "ex10_gpu_decode"
pytestmark = pytest.mark.starts_processes  # graded under spawn too by `make test`


@pytest.mark.step(1, "raw bytes from the shards")
@pytest.mark.spawn_covered_by("loader_yields_device_batches_in_order")
def test_raw_batches_keep_order_and_every_sample(grade):
    """read_batches: every sample once as its file's bytes with its label; written order with 0 workers and with 1;
    every batch full except the last, which is kept; with 0, 1 (batches of 7) and 2 workers."""
    grade()


@pytest.mark.step(2, "decode and crop on the device")
def test_decoded_crops_match_reference(grade):
    """decode_batch of every training image of ci (200, spread evenly, on larger profiles), on the CPU and on the
    device, gives uint8 (N, 3, 224, 224) there, within the route's tolerance of the reference 256-resize + 224 centre
    crop: 0.75 levels on average (1.5 for any image) decoded on the CPU, 2.0 (6.0) on a GPU."""
    grade()


@pytest.mark.step(2, "decode and crop on the device")
def test_decodes_each_batch_in_one_call(grade):
    """decode_batch decodes a batch in one call of loaderlab.device.decode_jpegs, never one image per call."""
    grade()


@pytest.mark.step(2, "decode and crop on the device")
def test_crops_stay_on_the_device(grade):
    """On every machine, against a CPU stand-in of CUDA: decode_batch asked for 'cuda' or torch.device('cuda', 0)
    crops every image where it was decoded (nothing comes back to the host: no cpu(), numpy(), tolist(), item() or
    to('cpu') of a decoded image) and returns uint8 (N, 3, 224, 224) on that device."""
    grade()


@pytest.mark.step(3, "the loader")
@pytest.mark.timeout_s(180)
def test_loader_yields_device_batches_in_order(grade):
    """gpu_decode_loader: batches on the device, in written order with no workers, every sample once with 2; exactly
    num_workers worker processes; one decode call per batch in this process; nothing left running after an early stop;
    device=None gives batches on default_device()."""
    grade()


@pytest.mark.step(3, "the loader")
# Under spawn: the same gpu_decode_loader in spawn workers.
@pytest.mark.spawn_covered_by("loader_yields_device_batches_in_order")
def test_bad_shards_raise_clear_errors(grade):
    """A folder with no shards, a truncated shard (with 0 and 2 workers) and a sample that is not a JPEG raise errors
    naming the folder, the shard or the sample; never a silent short epoch."""
    grade()


@pytest.mark.step(4, "speed (CUDA only)")
@pytest.mark.throughput
@pytest.mark.timeout_s(300)
@pytest.mark.cuda_only(also="no_hardware_decoder_reason")
def test_device_decode_beats_cpu_workers(grade):
    """CUDA with nvJPEG's hardware decoder: with 2 workers each, decoding on the GPU gives at least 2x the images/s of
    a CPU loader doing exercise 04's work in its workers (`loaderlab.baselines.draft_crop_loader`, each batch copied
    to the GPU). Skipped, with the reason, on a GPU without the hardware decoder (the marker's `also`): the target
    was not calibrated there."""
    grade()
