"""Exercise 10: decode on the device. Workers read raw JPEG bytes from module 06's shards; the device decodes.

`gpu_decode_loader(shard_dir, batch_size, device, num_workers)` yields batches of uint8
(N, 3, 224, 224) centre crops and int64 labels on `device`. DataLoader workers only read the shards
(bytes, cheap to send between processes); each batch is decoded in ONE call of
`loaderlab.device.decode_jpegs` (nvJPEG on a CUDA GPU: one batch on a GPU with the hardware JPEG engine,
A100/H100 class, one image after another with Huffman decoding on the host elsewhere; the CPU's decoder
without a GPU), then resized and centre-cropped where it was decoded. Without a GPU the same code runs
on the CPU: right, but not fast (one process decodes); it pays where a device decodes.

Files: Every kind of file the dataset mixes (`data_gen.encodings`: progressive, 4:2:2 and 4:4:4, grayscale,
Adobe CMYK and YCCK, EXIF-tagged camera files, a PNG under a .jpg name) gives the reference's pixels
(`loaderlab.images`: read by its content, kept as stored with no EXIF rotation, grayscale as three equal channels,
CMYK as Pillow converts it). `decode_jpegs` sees to it: its one call hands nvJPEG the JPEGs it takes (the hardware
engine batches the baseline ones; progressive files go one by one to nvJPEG's hybrid decoder) and decodes the rest
on the CPU by their content (a PNG under a .jpg name, which no JPEG decoder reads; CMYK and YCCK, which torchvision
never lets nvJPEG convert).

The shards are module 06's tar shards, written and read with the course's own `loaderlab.tar_shards`
(`TarShardReader`: every sample once, in written order, each DataLoader worker its own shards), so this
exercise does not depend on your exercise 08.

The grader checks, on every machine: every sample once, in written order with 0 or 1 workers, the last
partial batch kept, bytes and labels unchanged; pixels of `loaderlab.images.reference_crop`'s crop, within
0.75 levels on average (1.5 for any image) where the CPU decodes (its decoder is the reference's, so only the
resize can differ), 2.0 (6.0) where a GPU does; one decode call per batch, in this process; on a CPU stand-in
of CUDA, that `decode_batch` asked for a CUDA device crops each image where it was decoded, nothing brought
back to the host; `num_workers` worker processes; clear errors for a missing folder, a truncated shard and a
sample that is not an image; nothing left running. Without a GPU those checks decode on the CPU: nvJPEG's
pixels and its speed are not graded there. The speed against an exercise-04-style CPU loader with the same
workers is graded on a CUDA GPU with nvJPEG's hardware decoder only, where its target was calibrated; elsewhere
it is skipped, the grade says why, and the exercise reads "correct here, GPU part not graded" at best.
Grade: `pytest grader/test_ex10_gpu_decode.py`. Hints: `make hint EX=ex10`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from torch.utils.data import DataLoader  # noqa: F401  (you will need these)
from torchvision.transforms.v2 import functional as F  # noqa: F401

from loaderlab.device import decode_jpegs, default_device  # noqa: F401
from loaderlab.images import CROP, RESIZE  # noqa: F401
from loaderlab.tar_shards import ShardSample, TarShardReader  # noqa: F401

WORKER_TIMEOUT_S = 120.0  # a worker silent for this long is an error, not a reason to wait forever


class RawBatch(NamedTuple):
    """One batch as the workers send it: encoded bytes, labels and keys, in the same order."""

    jpegs: list[bytes]
    labels: torch.Tensor  # int64 (N,)
    keys: list[str]       # "circles/circles_000003": names a sample in error messages


def read_batches(shard_dir: Path | str, batch_size: int, num_workers: int) -> Iterator[RawBatch]:
    """The raw bytes of every sample in the shards, as `RawBatch`es of `batch_size` (the last may be shorter).

    Contract (the grader checks each point):
    - every sample exactly once; with `num_workers` 0 or 1 in written order (with more, each worker
      reads its own shards in order and the DataLoader takes their chunks in turn);
    - every batch full except the last, which is kept;
    - `num_workers` DataLoader worker processes read the shards, and send bytes, never pixels;
    - a missing folder, or a truncated shard, raises an error naming it.
    """
    # TODO(ex10, step 1): a DataLoader over TarShardReader(shard_dir) with num_workers workers (and a
    # timeout when there are workers). The default collate cannot stack bytes: give it a collate_fn (a
    # top-level function, so spawn can pickle it) that keeps a chunk as lists of bytes, labels and keys.
    # Each worker ends on a partial chunk of its own, so do not yield the chunks as they come: gather
    # them and cut batches of batch_size here; after the loop, yield what is left.
    raise NotImplementedError("TODO(ex10, step 1) in exercises/ex10_gpu_decode.py: read_batches")


def resize_center_crop(image: torch.Tensor) -> torch.Tensor:
    """A uint8 (3, H, W) image, on any device: the short side resized to 256 (bilinear, antialiased, aspect
    ratio kept), then the centre 224 x 224. Within 0.75 levels on average (1.5 for any image) of
    `reference_crop` for an image the CPU decoded, 2.0 (6.0) for one a GPU decoded."""
    # TODO(ex10, step 2): the same crop as `reference_crop`, but on a tensor and on whatever device the image is on
    # (the GPU decoder's output never comes back to the CPU): uint8 in, uint8 out, nothing copied across.
    raise NotImplementedError("TODO(ex10, step 2) in exercises/ex10_gpu_decode.py: resize_center_crop")


def decode_batch(jpegs: Sequence[bytes], device: torch.device | str, names: Sequence[str] | None = None) -> torch.Tensor:
    """Decode a batch of JPEGs on `device` in ONE call of `decode_jpegs`, crop each: uint8 (N, 3, 224, 224) there.

    `names` (the samples' keys) go to `decode_jpegs`, which names a sample that does not decode.
    """
    # TODO(ex10, step 2): one decode_jpegs call for the whole list (nvJPEG's hardware decoder decodes a list far
    # faster than one image per call; without it the call is the same), then resize_center_crop each image (they differ in size, so they cannot be
    # stacked before) and stack the crops.
    raise NotImplementedError("TODO(ex10, step 2) in exercises/ex10_gpu_decode.py: decode_batch")


def gpu_decode_loader(shard_dir: Path | str, batch_size: int = 64, device: torch.device | str | None = None,
                      num_workers: int = 2) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of (uint8 (N, 3, 224, 224) centre crops, int64 (N,) labels) on `device`, from the shards.

    Contract (the grader checks each point):
    - every sample once, the order and batches of `read_batches`, labels kept, both tensors on `device`
      (None: `default_device()`, the accelerator if there is one);
    - decoded in this process, one `decode_jpegs` call per batch; a sample that does not decode raises
      an error naming its key (never a silent skip);
    - stopping early (closing the generator, or dropping it) stops the workers.
    """
    # TODO(ex10, step 3): read_batches, then decode_batch each batch on the device with its keys as names, and
    # move the labels there too. Close the batches you read from in a `finally`, so that a caller who
    # stops early stops the workers.
    raise NotImplementedError("TODO(ex10, step 3) in exercises/ex10_gpu_decode.py: gpu_decode_loader")
