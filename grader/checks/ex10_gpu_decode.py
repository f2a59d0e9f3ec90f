"""Checks for exercise 10 (decoding on the device). Each check copies 40 training images (spread over every class)
into a temporary ImageFolder tree and packs them with the course's shard writer (`loaderlab.tar_shards`) into
shards of 5 samples. The correctness checks run on the default device
(the GPU where there is one, else the CPU); the timed check needs CUDA and is skipped, with the reason, elsewhere."""

from __future__ import annotations

import gc
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from grader.support import (ANY_IMAGE_SAMPLES, CudaStandIn, assert_near_reference_crops, child_processes,
                            dataset_samples, expected_crop, in_promised_type, no_leaks, on_cuda_stand_in, relative_str,
                            require, within)
from loaderlab.bench import Comparison
from loaderlab.images import CROP, MEAN_TOLERANCE, WORST_TOLERANCE, Sample, list_samples, mean_abs_difference
from loaderlab.paths import dataset_dir
from loaderlab.tar_shards import sample_key

# What these checks and the exercise import: a waiting grading process imports it once (grader.preload).
PRELOAD = ("torch", "torchvision")

SAMPLES = 40
SAMPLES_PER_SHARD = 5      # 8 shards: four for each of two workers
BATCH = 16                 # 40 samples: batches of 16, 16 and a partial 8
RAW_RUNS = ((0, BATCH), (1, 7), (2, BATCH))   # read_batches' (num_workers, batch_size): 0 and 1 keep written order
# Pixel tolerances, per route, in levels (mean over the images, any one image). On the CPU (torchvision's decoder,
# libjpeg-turbo, as reference_crop's Pillow is): CPU_TOLERANCES. Measured on this course's data (2-core CPU box, one run
# each, the figures are deterministic), against reference_crop: the solution (transforms.v2 resize, uint8, antialiased,
# centre crop) 0.002 / 0.04 (ci, all 200 training images) and 0.002 / 0.08 (workshop, all 9000); resizing in float32
# and rounding, as v2 does on CUDA, 0.150 / 0.19 (ci) and 0.151 / 0.20 (workshop); in float32 and truncated, 0.50 /
# 0.56 (ci); wrong filters: without antialias 1.58 / 4.49, bicubic 0.91 / 2.12, nearest 5.39 / 11.9, a short side
# of 257 4.28 / 11.0 (ci). On a device decoder, the course's tolerance, 2.0 / 6.0: nvJPEG rounds its IDCT and chroma
# upsampling differently from libjpeg-turbo. The H100 runs that set the timed target passed the old check (2.0 / 6.0
# on 24 images) first, since timing runs only after it, but the value was not recorded: notebook 07 now records it
# ("ex10: levels from the reference crop"), owed with the GPU runs in docs/gpu-measurements-owed.md.
CPU_TOLERANCES = (0.75, 1.5)
DEVICE_TOLERANCES = (MEAN_TOLERANCE, WORST_TOLERANCE)
TIMED_BATCH, TIMED_WORKERS = 64, 2
# nvJPEG's hardware decoder (A100/H100 class) decodes a batch of these 300-600 px JPEGs far faster than two CPU
# workers with JPEG draft mode. Measured on an NVIDIA H100 80GB HBM3, which has that decoder (16 cores, 2 workers
# each although 16 cores were free, 400 images in batches of 64, torch 2.11, torchvision 0.26, 2026-11-22): the
# solution 5.20x, 3.26x, 4.25x, 4.74x the exercise-04 solution's loader (the baseline is now
# loaderlab.baselines.draft_crop_loader: the same decode and crop, not yet re-measured on a GPU); the planted
# ex10_decodes_on_the_host 0.57x, 0.60x.
# Against the exercise-04 loader with a worker per core the solution has not been measured.
# On a GPU without the hardware engine torchvision falls back to decoding one image at a time, Huffman decoding on
# the host (loaderlab.device.nvjpeg_path): the target was never calibrated there, so the timed check is skipped with
# that reason (docs/gpu-measurements-owed.md).
DEVICE_DECODE_TARGET = 2.0
NOT_A_JPEG = b"<html><body><h1>404 Not Found</h1>The image was removed.</body></html>\n"


# ---- helpers -------------------------------------------------------------------------------------

@contextmanager
def _shards(count: int = SAMPLES, extra: dict[str, bytes] | None = None) -> Iterator[tuple[Path, list[Sample]]]:
    """Shards of `count` training images (plus `extra` files, "<class>/<name>.jpg": bytes) in a temporary folder,
    and the samples in written order."""
    from loaderlab.tar_shards import write_tar_shards

    train = dataset_dir() / "train"
    with tempfile.TemporaryDirectory(prefix="loaderlab-ex10-") as tmp:
        root = Path(tmp) / "train"
        for sample in dataset_samples("train", count):
            relative = sample.path.relative_to(train)
            (root / relative.parent).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(sample.path, root / relative)
        for name, data in (extra or {}).items():
            (root / name).write_bytes(data)
        write_tar_shards(root, Path(tmp) / "shards", SAMPLES_PER_SHARD)
        yield Path(tmp) / "shards", list_samples(root)


def _device() -> Any:
    from loaderlab.device import default_device

    return default_device()


def _expected_sizes(count: int, batch_size: int) -> list[int]:
    return [min(batch_size, count - start) for start in range(0, count, batch_size)]


def _check_sizes(sizes: list[int], count: int, batch_size: int, setting: str) -> None:
    expected = _expected_sizes(count, batch_size)
    if sum(sizes) < count and sizes == expected[:-1]:
        raise AssertionError(
            f"{setting}: batch sizes {sizes}, expected {expected}: the last, partial batch of {expected[-1]} samples "
            "never came. After the loop over the workers' chunks, yield what is left: those samples are lost every "
            "epoch otherwise.")
    assert sizes == expected, (
        f"{setting}: batch sizes {sizes}, expected {expected}: every sample once, every batch full except the last "
        "(the workers each end on a partial chunk: gather the chunks and cut batches of batch_size yourself).")


def _nearest(image: np.ndarray, references: list[np.ndarray]) -> tuple[int, float]:
    """The reference this (224, 224, 3) crop shows, and how far it is (compared at a quarter of the resolution)."""
    small = image[::4, ::4]
    distances = [mean_abs_difference(small, reference[::4, ::4]) for reference in references]
    best = int(np.argmin(distances))
    return best, distances[best]


@contextmanager
def _decoder_replaced(ex: ModuleType, replacement: Any) -> Iterator[Any]:
    """`loaderlab.device.decode_jpegs` replaced by `replacement(original, data, *args, **kwargs)` while the block runs,
    where the learner's module calls it through the adapter and under any name it imported it as."""
    import loaderlab.device as adapter

    original = adapter.decode_jpegs

    def replaced(data: Any, *args: Any, **kwargs: Any) -> Any:
        return replacement(original, data, *args, **kwargs)

    rebound = [name for name, value in vars(ex).items() if value is original]
    adapter.decode_jpegs = replaced
    for name in rebound:
        setattr(ex, name, replaced)
    try:
        yield replaced
    finally:
        adapter.decode_jpegs = original
        for name in rebound:
            setattr(ex, name, original)


@contextmanager
def _counting_decoder(ex: ModuleType) -> Iterator[list[int]]:
    """Count the calls of `loaderlab.device.decode_jpegs` made in this process (and how many images each decodes)."""
    calls: list[int] = []

    def counting(original: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(data))
        return original(data, *args, **kwargs)

    with _decoder_replaced(ex, counting):
        yield calls


def _device_batches(batches: list[Any], device: Any, setting: str) -> tuple[np.ndarray, list[int]]:
    """Check (images, labels) batches: uint8 (N, 3, 224, 224) and int64 (N,) tensors on `device`; return the images
    as one NHWC numpy array, and the labels."""
    import torch

    images, labels = [], []
    for number, batch in enumerate(batches):
        assert isinstance(batch, (tuple, list)) and len(batch) == 2, (
            f"{setting}: batch {number} is a {type(batch).__name__}; yield (images, labels) pairs.")
        batch_images, batch_labels = batch
        assert isinstance(batch_images, torch.Tensor) and batch_images.dtype == torch.uint8 \
            and batch_images.dim() == 4 and tuple(batch_images.shape[1:]) == (3, CROP, CROP), (
                f"{setting}: batch {number}'s images must be a uint8 tensor (N, 3, {CROP}, {CROP}), got "
                f"{getattr(batch_images, 'dtype', type(batch_images).__name__)} "
                f"{tuple(getattr(batch_images, 'shape', ()))}.")
        assert batch_images.device.type == device.type, (
            f"{setting}: batch {number}'s images are on {batch_images.device}, not {device}: decode and crop there.")
        assert isinstance(batch_labels, torch.Tensor) and batch_labels.dtype == torch.int64 \
            and batch_labels.device.type == device.type and len(batch_labels) == len(batch_images), (
                f"{setting}: batch {number}'s labels must be an int64 tensor of {len(batch_images)} labels on {device}, "
                f"got {getattr(batch_labels, 'dtype', type(batch_labels).__name__)} on "
                f"{getattr(batch_labels, 'device', '?')}.")
        images.append(batch_images.permute(0, 2, 3, 1).cpu().numpy())
        labels += batch_labels.cpu().tolist()
    return (np.concatenate(images) if images else np.empty((0, CROP, CROP, 3), np.uint8)), labels


def _check_pixels(images: np.ndarray, samples: list[Sample], setting: str, device: Any) -> None:
    """Within the tolerances of the route that decoded them: the CPU's (torchvision's decoder, as the reference's)
    or a device decoder's."""
    mean, worst = CPU_TOLERANCES if device.type == "cpu" else DEVICE_TOLERANCES
    assert_near_reference_crops(images, samples, setting, mean, worst,
                                "Decode in RGB, resize the SHORT side to 256 keeping the aspect ratio (bilinear, "
                                "antialias=True), then take the centre 224 x 224"
                                + (" (on the CPU the decoder is the reference's, so only the resize can differ: "
                                   "another filter, or no antialiasing, shows)." if device.type == "cpu" else "."))


def no_hardware_decoder_reason() -> str | None:
    """Why the timed check cannot hold its target here (None on a GPU with nvJPEG's hardware decoder)."""
    from loaderlab.device import HARDWARE, nvjpeg_path

    path, why = nvjpeg_path()
    if path == HARDWARE:
        return None
    return (f"needs a GPU with nvJPEG's hardware decoder (A100 or H100 class), where its {DEVICE_DECODE_TARGET}x "
            f"target was calibrated (such a GPU decodes a batch at once); here {why}, so the target does not apply; "
            "it is timed on such a GPU")


# ---- correctness ----------------------------------------------------------------------------------

def raw_batches_keep_order_and_every_sample(ex: ModuleType) -> None:
    import torch

    read_batches = require(ex, "read_batches")
    with _shards() as (shard_dir, samples):
        keys = [sample_key(s) for s in samples]
        data = {sample_key(s): s.path.read_bytes() for s in samples}
        label_of = {sample_key(s): s.label for s in samples}
        for workers, batch_size in RAW_RUNS:
            setting = f"read_batches(shard_dir, batch_size={batch_size}, num_workers={workers})"
            with no_leaks(setting):
                batches = within(90, setting, lambda: list(read_batches(shard_dir, batch_size, workers)))
            for number, batch in enumerate(batches):
                assert isinstance(batch, tuple) and len(batch) == 3, (
                    f"{setting}: batch {number} is a {type(batch).__name__}; yield RawBatch(jpegs, labels, keys).")
                jpegs, labels, batch_keys = batch
                assert isinstance(labels, torch.Tensor) and labels.dtype == torch.int64, (
                    f"{setting}: batch {number}'s labels must be an int64 tensor, got "
                    f"{getattr(labels, 'dtype', type(labels).__name__)}.")
                assert len(jpegs) == len(labels) == len(batch_keys), (
                    f"{setting}: batch {number} has {len(jpegs)} jpegs, {len(labels)} labels and {len(batch_keys)} keys.")
            _check_sizes([len(batch[2]) for batch in batches], len(samples), batch_size, setting)
            got = [key for batch in batches for key in batch[2]]
            repeated = sorted({key for key in got if got.count(key) > 1})
            assert not repeated and sorted(got) == sorted(keys), (
                f"{setting}: samples {repeated[:3]} came more than once, {sorted(set(keys) - set(got))[:3]} never: "
                "every sample exactly once (each worker reads its own shards: TarShardReader does that).")
            if workers <= 1:
                assert got == keys, (
                    f"{setting}: the samples did not come in written order (shuffle=False, "
                    f"{'no workers' if not workers else 'one worker reading every shard'}): keep the order the shards "
                    "give, and cut batches in order.")
            for jpegs, labels, batch_keys in batches:
                for jpeg, label, key in zip(jpegs, labels.tolist(), batch_keys):
                    assert isinstance(jpeg, bytes) and jpeg == data[key], (
                        f"{setting}: sample {key!r} is not the file's bytes as written ({type(jpeg).__name__}): the "
                        "workers send the raw JPEG bytes, untouched; the device decodes them.")
                    assert label == label_of[key], f"{setting}: sample {key!r} has label {label}, not {label_of[key]}."


def decoded_crops_match_reference(ex: ModuleType) -> None:
    import torch

    decode_batch = require(ex, "decode_batch")
    samples = dataset_samples("train", ANY_IMAGE_SAMPLES)   # "6.0 for any image": every image of ci
    jpegs, keys = [s.path.read_bytes() for s in samples], [sample_key(s) for s in samples]
    shape = (len(samples), 3, CROP, CROP)
    # The CPU route on every machine (its tolerance is the tight one: the decoder is the reference's), named by a str
    # (the contract takes a torch.device or a str), then the device's, as a torch.device.
    for device in dict.fromkeys((torch.device("cpu"), _device())):
        asked = "cpu" if device.type == "cpu" else device
        setting = f"decode_batch({len(samples)} JPEGs, {asked!r})"
        crops = within(60, setting, lambda: decode_batch(jpegs, asked, keys))
        assert isinstance(crops, torch.Tensor) and crops.dtype == torch.uint8 and tuple(crops.shape) == shape, (
            f"{setting} must return a uint8 tensor {shape}, got "
            f"{getattr(crops, 'dtype', type(crops).__name__)} {tuple(getattr(crops, 'shape', ()))}.")
        assert crops.device.type == device.type, f"{setting}: the crops are on {crops.device}, not {device}."
        _check_pixels(crops.permute(0, 2, 3, 1).cpu().numpy(), samples, setting, device)


def decodes_each_batch_in_one_call(ex: ModuleType) -> None:
    decode_batch = require(ex, "decode_batch")
    device = _device()
    samples = dataset_samples("train", BATCH)
    setting = f"decode_batch({BATCH} JPEGs, {device})"
    with _counting_decoder(ex) as calls:
        within(60, setting, lambda: decode_batch([s.path.read_bytes() for s in samples], device,
                                                 [sample_key(s) for s in samples]))
    assert calls, (
        f"{setting} never called loaderlab.device.decode_jpegs: decode through it (it picks nvJPEG on a CUDA GPU, "
        "the CPU's decoder elsewhere, and names a sample that does not decode).")
    assert calls == [BATCH], (
        f"{setting} called decode_jpegs {len(calls)} times, with {calls[:8]} images: one image at a time. On a GPU "
        "each call costs a launch and a synchronisation, and nvJPEG decodes a list in parallel: pass the whole batch "
        "in one call.")


STAND_IN_DEVICES = ("'cuda'", "torch.device('cuda', 0)")  # the contract takes a str or a torch.device


def crops_stay_on_the_device(ex: ModuleType) -> None:
    import torch

    decode_batch = require(ex, "decode_batch")
    samples = dataset_samples("train", BATCH)
    jpegs, keys = [s.path.read_bytes() for s in samples], [sample_key(s) for s in samples]
    for device_text in STAND_IN_DEVICES:
        device = "cuda" if device_text == "'cuda'" else torch.device("cuda", 0)
        setting = f"decode_batch({BATCH} JPEGs, {device_text}) on a CPU stand-in of CUDA"
        asked: list[Any] = []

        def run(stand_in: CudaStandIn) -> Any:
            def on_the_stand_in(original: Any, data: Any, device: Any = None, names: Any = None) -> Any:
                """Decoded on the CPU; what was asked for CUDA is marked as on the device."""
                asked.append(device)
                images = original(data, "cpu", names)
                on_cuda = device is None or torch.device(device).type == "cuda"  # None: the default device, a GPU
                return [stand_in.mark_on_device(image) for image in images] if on_cuda else images

            with _decoder_replaced(ex, on_the_stand_in):
                return decode_batch(jpegs, device, keys)

        crops, stand_in = on_cuda_stand_in(ex, setting, run)
        shape = (BATCH, 3, CROP, CROP)
        assert isinstance(crops, torch.Tensor) and crops.dtype == torch.uint8 and tuple(crops.shape) == shape, (
            f"{setting} must return a uint8 tensor {shape}, got "
            f"{getattr(crops, 'dtype', type(crops).__name__)} {tuple(getattr(crops, 'shape', ()))}.")
        assert not stand_in.copied_back, (
            f"{setting}: the decoded images came back to the host ({', '.join(dict.fromkeys(stand_in.copied_back))}) "
            "before they were cropped. On a GPU each such copy waits for the device and crosses the bus twice, and the "
            "host's cores do the device's work: resize and crop each image where it was decoded (torchvision's v2 "
            "functional ops take a tensor on any device), uint8 in, uint8 out.")
        assert stand_in.is_on_device(crops), (
            f"{setting}: the crops are not on the device: decode_jpegs was asked for {', '.join(map(repr, asked))}; "
            "decode on the device you are given, and keep what it returns there.")


def loader_yields_device_batches_in_order(ex: ModuleType) -> None:
    gpu_decode_loader = require(ex, "gpu_decode_loader")
    device = _device()
    with _shards() as (shard_dir, samples):
        references = [expected_crop(s.path) for s in samples]
        for workers in (0, 2):
            setting = f"gpu_decode_loader(shard_dir, batch_size={BATCH}, device={str(device)!r}, num_workers={workers})"
            started: list[int] = []

            def run(folder: Any, on: Any) -> list[Any]:
                before = {p.pid for p in child_processes()}
                iterator = iter(gpu_decode_loader(folder, BATCH, on, workers))
                first = next(iterator)
                started[:] = [len({p.pid for p in child_processes()} - before)]
                return [first, *iterator]

            with no_leaks(setting), _counting_decoder(ex) as calls:
                if workers:
                    batches = within(90, setting, lambda: run(shard_dir, device))
                else:  # the contract's other types: shard_dir as a relative str, the device as a str
                    batches = in_promised_type(
                        lambda given: within(90, setting, lambda: run(*given)), (relative_str(shard_dir), str(device)),
                        (shard_dir, device), f"{setting}, with shard_dir and the device given as strs,",
                        "with a Path and a torch.device", "The contract takes shard_dir as a Path or a str and the "
                        "device as a torch.device or a str.")
            assert started[0] == workers, (
                f"{setting}: {started[0]} worker processes were reading, not {workers}: pass num_workers on to the "
                "DataLoader, so that the shards are read by worker processes.")
            images, labels = _device_batches(batches, device, setting)
            sizes = [len(batch[0]) for batch in batches]
            _check_sizes(sizes, len(samples), BATCH, setting)
            assert calls == sizes, (
                f"{setting}: decode_jpegs was called in this process with {calls[:8]} images for batches of {sizes}: "
                "decode here, on the device, once per batch (decode_batch); the workers only read bytes.")
            if workers == 0:
                assert labels == [s.label for s in samples], (
                    f"{setting}: the labels are not the samples' labels in written order.")
                _check_pixels(images, samples, setting, device)
                continue
            found = [_nearest(image, references) for image in images]
            far = [position for position, (_, distance) in enumerate(found) if distance > WORST_TOLERANCE]
            assert not far, f"{setting}: images at positions {far[:5]} match no sample's centre crop."
            order = [index for index, _ in found]
            assert sorted(order) == list(range(len(samples))), (
                f"{setting}: some samples came twice and others never: each worker must read only its own shards "
                "(ShardDataset splits them by get_worker_info()), and every chunk a worker sends must be batched once.")
            assert labels == [samples[i].label for i in order], (
                f"{setting}: some labels belong to other images: the labels were gathered in another order than the "
                "JPEGs (keep each chunk's jpegs, labels and keys together as you cut batches).")

        setting = "gpu_decode_loader(..., num_workers=1), closed after its first batch"

        def stop_early() -> None:
            iterator = iter(gpu_decode_loader(shard_dir, BATCH, device, 1))
            next(iterator)
            close = getattr(iterator, "close", None)
            if callable(close):
                close()

        with no_leaks(setting):
            within(60, setting, stop_early)

        setting = f"gpu_decode_loader(shard_dir, batch_size={BATCH}, num_workers=0), device left to its default (None)"
        with no_leaks(setting):
            try:
                batches = within(90, setting, lambda: list(gpu_decode_loader(shard_dir, BATCH, num_workers=0)))
            except (NotImplementedError, AssertionError):
                raise
            except Exception as err:
                raise AssertionError(
                    f"{setting} raised {type(err).__name__}: {err}. device=None means default_device() (the "
                    "accelerator if there is one, else the CPU): resolve it before decoding.") from err
        _device_batches(batches, device, setting + f": None means default_device(), here {device}")


def bad_shards_raise_clear_errors(ex: ModuleType) -> None:
    gpu_decode_loader = require(ex, "gpu_decode_loader")
    device = _device()

    def error_of(shard_dir: Path, workers: int, what: str) -> tuple[str | None, int]:
        """The error the loader raised, as text (so its traceback, which holds the loader's frames, is gone), and
        how many samples came before it."""
        seen = [0]

        def run() -> str | None:
            try:
                for images, _ in gpu_decode_loader(shard_dir, 8, device, workers):
                    seen[0] += len(images)
            except NotImplementedError:
                raise
            except Exception as err:
                return f"{type(err).__name__}: {err}"
            return None

        with no_leaks(what):
            error = within(60, what, run)
            gc.collect()  # a DataLoader's re-raised worker error sits in a reference cycle that holds its iterator
        return error, seen[0]

    with tempfile.TemporaryDirectory(prefix="loaderlab-ex10-empty-") as empty:
        error, _ = error_of(Path(empty), 0, "gpu_decode_loader on a folder with no shards")
        assert error is not None and Path(empty).name in error, (
            "gpu_decode_loader on a folder with no shards " + ("gave an empty epoch without a word" if error is None
                                                               else f"raised {error}") +
            ": raise an error naming the folder (TarShardReader does) and let it through.")
    with _shards() as (shard_dir, samples):
        shard = sorted(shard_dir.iterdir())[1]
        data = shard.read_bytes()
        shard.write_bytes(data[: len(data) * 6 // 10])
        for workers in (0, 2):
            what = f"gpu_decode_loader(num_workers={workers}) on shards with a truncated {shard.name}"
            error, seen = error_of(shard_dir, workers, what)
            assert error is not None, (
                f"{what}: the epoch ended normally with {seen} of {len(samples)} samples. A truncated shard must raise "
                "an error naming it: let the workers' errors through.")
            assert shard.name in error, f"{what}: raised {error}; it must name {shard.name}."
    with _shards(extra={"circles/zz_not_a_jpeg.jpg": NOT_A_JPEG}) as (shard_dir, samples):
        what = "gpu_decode_loader on shards holding circles/zz_not_a_jpeg, an HTML page saved as .jpg"
        error, seen = error_of(shard_dir, 0, what)
        assert error is not None, (
            f"{what}: the epoch ended normally with {seen} of {len(samples)} samples: a sample that does not decode was "
            "skipped silently. Let the error through (decode_jpegs raises one naming the sample when you pass the "
            "keys as names): a dataset that shrinks without a word hides the problem.")
        assert "zz_not_a_jpeg" in error, (
            f"{what}: raised {error}; name the sample (pass the batch's keys to decode_jpegs as names).")


# ---- CUDA only: speed ---------------------------------------------------------------------------------

def device_decode_beats_cpu_workers(ex: ModuleType) -> Comparison:
    import torch

    from loaderlab.baselines import draft_crop_loader
    from loaderlab.device import compare_on_cuda, jpeg_decoder

    gpu_decode_loader = require(ex, "gpu_decode_loader")
    device = torch.device("cuda")
    count = min(400, len(list_samples(dataset_dir() / "train")))
    with _shards(count) as (shard_dir, samples):
        root = shard_dir.parent / "train"
        print(f"{len(samples)} images, batch {TIMED_BATCH}, {TIMED_WORKERS} workers each; "
              f"decoder: {jpeg_decoder(device)}; baseline: the course's CPU loader doing exercise 04's work (JPEG draft mode, "
              "one crop-resize) decoding in CPU workers, each batch copied to the GPU")

        def cpu_workers() -> int:
            images = 0
            for batch, _ in draft_crop_loader(root, batch_size=TIMED_BATCH, num_workers=TIMED_WORKERS):
                images += len(batch.to(device, non_blocking=True))
            return images

        def device_decode() -> int:
            return sum(len(batch) for batch, _ in gpu_decode_loader(shard_dir, TIMED_BATCH, device, TIMED_WORKERS))

        return within(240, "timing gpu_decode_loader against CPU workers", lambda: compare_on_cuda(
            cpu_workers, device_decode, rounds=3, warmup_rounds=1, name="gpu_decode_loader",
            baseline_name=f"draft-crop CPU loader, {TIMED_WORKERS} workers", target=DEVICE_DECODE_TARGET, unit="images",
            device=device))
