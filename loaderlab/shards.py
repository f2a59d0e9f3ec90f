"""Shards that need no decoding, and an HDF5 dataset that opens its file per worker.

- `write_array_shards` / `ArrayShards`: crops preprocessed once to the training size
  and stored as raw uint8 `.npy` shards, read back by memory map (no decode at all).
  Module 06 measures them; module 07 feeds them to the accelerator.
- `HDF5Samples`: encoded images in one HDF5 file, opened lazily in each process
  (the per-worker handle rule), or, to show the pitfall, in `__init__`.

How shuffled a read order is: `loaderlab.order`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset

from loaderlab.images import CROP, Sample, reference_crop

IMAGE_SHAPE = (CROP, CROP, 3)


def write_array_shards(samples: Sequence[Sample], out_dir: Path | str, samples_per_shard: int) -> list[Path]:
    """Decode and centre-crop every sample once, and store shards of `(images uint8 (N, 224, 224, 3), labels)`.

    Shard k is `images-{k:05d}.npy` plus `labels-{k:05d}.npy`; the last one may be partial.
    Returns the image files written.
    """
    if samples_per_shard < 1:
        raise ValueError("samples_per_shard must be at least 1")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for shard, start in enumerate(range(0, len(samples), samples_per_shard)):
        chunk = samples[start : start + samples_per_shard]
        images = np.lib.format.open_memmap(out_dir / f"images-{shard:05d}.npy", mode="w+", dtype=np.uint8,
                                           shape=(len(chunk), *IMAGE_SHAPE))
        for row, sample in enumerate(chunk):
            images[row] = reference_crop(sample.path)
        images.flush()
        del images
        np.save(out_dir / f"labels-{shard:05d}.npy", np.array([s.label for s in chunk], dtype=np.int64))
        written.append(out_dir / f"images-{shard:05d}.npy")
    return written


class ArrayShards(Dataset):
    """Map-style dataset over `write_array_shards` output: item i is `(image uint8 (224, 224, 3), label)`.

    The shards are memory-mapped on first use in each process (a map is not shared
    across fork safely and does not pickle for spawn), so reading a sample is a
    page-cache copy, with no decode.
    """

    def __init__(self, out_dir: Path | str) -> None:
        self.image_files = sorted(Path(out_dir).glob("images-*.npy"))
        if not self.image_files:
            raise FileNotFoundError(f"{out_dir} holds no images-*.npy shards: write them with write_array_shards().")
        self.labels = [np.load(str(f).replace("images-", "labels-")) for f in self.image_files]
        self.starts = np.cumsum([0] + [len(labels) for labels in self.labels])
        self._maps: dict[int, np.ndarray] = {}
        self._pid = -1

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        if self._pid != os.getpid():  # a new process: map the files afresh
            self._maps, self._pid = {}, os.getpid()
        shard = int(np.searchsorted(self.starts, index, side="right") - 1)
        if shard not in self._maps:
            self._maps[shard] = np.load(self.image_files[shard], mmap_mode="r")
        row = index - int(self.starts[shard])
        return np.array(self._maps[shard][row]), int(self.labels[shard][row])

    def __getstate__(self) -> dict[str, object]:
        return self.__dict__ | {"_maps": {}, "_pid": -1}


class HDF5Samples(Dataset):
    """Map-style dataset over an HDF5 file of encoded images: item i is `(encoded bytes, label)`.

    The file holds `data` (variable-length uint8, one encoded image per row) and
    `labels` (int64). The rule: open the file in each worker, on first use. With
    `open_in_init=True` the handle is opened in `__init__`, in the parent, which is
    the pitfall: spawn cannot pickle it, and a handle inherited through fork shares
    the HDF5 library's state with the parent, which h5py does not support.
    """

    def __init__(self, path: Path | str, open_in_init: bool = False) -> None:
        import h5py

        self.path = Path(path)
        with h5py.File(self.path, "r") as handle:
            self.length = len(handle["labels"])
        self.open_in_init = open_in_init
        self._file = h5py.File(self.path, "r") if open_in_init else None
        self._pid = os.getpid()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[bytes, int]:
        import h5py

        if self._file is None or (not self.open_in_init and self._pid != os.getpid()):
            self._file, self._pid = h5py.File(self.path, "r"), os.getpid()
        return self._file["data"][index].tobytes(), int(self._file["labels"][index])

    def __getstate__(self) -> dict[str, object]:
        # The rule's version sends no handle to a worker; the pitfall's tries to (and spawn fails).
        return self.__dict__ if self.open_in_init else self.__dict__ | {"_file": None}
