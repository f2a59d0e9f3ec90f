"""Exercise 10, reference solution: workers read raw JPEG bytes from the shards; the device decodes whole batches.

Design choices:
- the shards are module 06's tar shards: the course's `loaderlab.tar_shards.TarShardReader` reads them in
  DataLoader workers, each worker its own shards in written order, and hands back bytes, never pixels;
- the workers' chunks are cut into batches in this process, so every batch is full except the last, even
  though each worker ends on a partial chunk of its own;
- each batch is decoded in ONE call of `loaderlab.device.decode_jpegs` (nvJPEG on a CUDA GPU, batched on
  the hardware decoder only, see `loaderlab.device.nvjpeg_path`; the CPU's decoder elsewhere), then every image is resized (short side 256, antialiased bilinear) and centre-cropped
  to 224 where it was decoded, and the batch is stacked there as uint8 (N, 3, 224, 224);
- a sample that does not decode raises an error naming its key (the adapter names it), never a silent skip;
- the decoder is called as `loaderlab.device.decode_jpegs`, through its module, so that the grader's count of its
  calls sees them from any module that reuses these pieces (a planted variant inherits `decode_batch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from torch.utils.data import DataLoader
from torchvision.transforms.v2 import functional as F

import loaderlab.device
from loaderlab.images import CROP, RESIZE
from loaderlab.tar_shards import ShardSample, TarShardReader

WORKER_TIMEOUT_S = 120.0  # a worker silent for this long is an error, not a reason to wait forever


class RawBatch(NamedTuple):
    """One batch as the workers send it: encoded bytes, labels and keys, in the same order."""

    jpegs: list[bytes]
    labels: torch.Tensor  # int64 (N,)
    keys: list[str]


def collate_raw(samples: list[ShardSample]) -> tuple[list[bytes], list[int], list[str]]:
    """A worker's chunk as plain lists: bytes need no collating and pickle as they are."""
    return [s.data for s in samples], [s.label for s in samples], [s.key for s in samples]


class GpuDecode:
    """The loader's pieces, each a method that a variant can replace (tests/planted/ex10_* each replace one and
    keep the rest); the module's functions below are those of `REFERENCE`."""

    def raw_loader(self, shard_dir: Path | str, batch_size: int, num_workers: int) -> DataLoader:
        """DataLoader workers that read the shards' raw bytes, chunks of `batch_size` samples as plain lists."""
        return DataLoader(TarShardReader(shard_dir), batch_size=batch_size, num_workers=num_workers,
                          collate_fn=collate_raw, timeout=WORKER_TIMEOUT_S if num_workers else 0)

    def read_batches(self, shard_dir: Path | str, batch_size: int, num_workers: int) -> Iterator[RawBatch]:
        """The raw bytes of every sample in the shards, `batch_size` at a time (the last batch may be shorter),
        read by `num_workers` DataLoader workers; in written order with 0 or 1 workers."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be 0 or more, got {num_workers}")
        jpegs: list[bytes] = []
        labels: list[int] = []
        keys: list[str] = []
        for chunk_jpegs, chunk_labels, chunk_keys in self.raw_loader(shard_dir, batch_size, num_workers):
            jpegs += chunk_jpegs
            labels += chunk_labels
            keys += chunk_keys
            while len(keys) >= batch_size:
                yield RawBatch(jpegs[:batch_size], torch.tensor(labels[:batch_size], dtype=torch.int64),
                               keys[:batch_size])
                del jpegs[:batch_size], labels[:batch_size], keys[:batch_size]
        if keys:  # the last, partial batch
            yield RawBatch(jpegs, torch.tensor(labels, dtype=torch.int64), keys)

    def resize_center_crop(self, image: torch.Tensor) -> torch.Tensor:
        """A uint8 (3, H, W) image, on any device: short side to 256 (bilinear, antialiased), then the centre 224 x 224."""
        return F.center_crop(F.resize(image, [RESIZE], antialias=True), [CROP, CROP])

    def decode_batch(self, jpegs: Sequence[bytes], device: torch.device | str,
                     names: Sequence[str] | None = None) -> torch.Tensor:
        """Decode a batch of JPEGs on `device` in one call and crop each: uint8 (N, 3, 224, 224) on `device`."""
        images = loaderlab.device.decode_jpegs(jpegs, device, names)
        if not images:
            return torch.empty((0, 3, CROP, CROP), dtype=torch.uint8, device=device)
        return torch.stack([self.resize_center_crop(image) for image in images])

    def gpu_decode_loader(self, shard_dir: Path | str, batch_size: int = 64, device: torch.device | str | None = None,
                          num_workers: int = 2) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches of (uint8 (N, 3, 224, 224) centre crops, int64 (N,) labels) on `device` from the shards in
        `shard_dir`: workers read bytes, the device decodes. `device=None`: the accelerator, else the CPU."""
        device = torch.device(device) if device is not None else loaderlab.device.default_device()
        batches = self.read_batches(shard_dir, batch_size, num_workers)
        try:
            for batch in batches:
                yield self.device_batch(batch, device)
        finally:
            batches.close()  # stops the workers when the caller stops early

    def device_batch(self, batch: RawBatch, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch decoded on `device`, its labels there too."""
        return self.decode_batch(batch.jpegs, device, batch.keys), batch.labels.to(device)


REFERENCE = GpuDecode()
read_batches = REFERENCE.read_batches
resize_center_crop = REFERENCE.resize_center_crop
decode_batch = REFERENCE.decode_batch
gpu_decode_loader = REFERENCE.gpu_decode_loader
