"""The course's data in the S3 server: a dataset profile uploaded once, in the two layouts module 10 compares.

Bucket `loaderlab-<profile>` holds, for the splits train and val:
- `images-<p>/<split>/<class>/<file>.jpg`: one object per image, p = position in the split mod IMAGE_PREFIXES
  (neighbours in list order land in different prefixes, the prefixes hold equal shares);
- `shards/<split>/shard-00000.tar ...`: `loaderlab.tar_shards`'s layout (a `.jpg` and a `.cls` member per sample);
- `shards/<split>/index.json`: every sample's key, label, object key, shard key, and the offset and size of its
  image bytes inside the shard, so a reader needs no LIST and can fetch one sample with a ranged GET;
- `loaderlab-dataset.json`, written last: the dataset's identity (profile, seed, data_gen's generator version, the
  fingerprint of every uploaded file and of this layout, how many objects). `upload_dataset` uses the bucket as it
  is only when that marker matches the local dataset, both indexes are there and each split's last shard has the
  size its index records; otherwise (a changed dataset, a new layout, an upload that stopped half way: no marker)
  it empties the bucket, so that no stale object survives, and uploads again.
The server keeps its data between starts (`loaderlab.storage.server`), so this upload is paid once per machine.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderlab.images import list_samples
from loaderlab.paths import dataset_dir
from loaderlab.storage.server import Endpoint
from loaderlab.tar_shards import LABEL_SUFFIX, SHARD_NAME, sample_key, write_tar_shards

LAYOUT_VERSION = 1  # raise it when the layout below changes: every bucket is then uploaded again
SPLITS = ("train", "val")
# 4 prefixes: spreading per-object GETs over them lifts the proxy's per-prefix rate limit fourfold (the lesson on S3's
# 5,500 GET/s per partitioned prefix: S3 itself gives a new prefix no capacity of its own until sustained load makes it
# partition one, and partitions on key prefixes of any length, not at slashes), while each of ci's prefixes still
# holds 50 train images.
IMAGE_PREFIXES = 4
# 16 samples a shard: ci's train split makes 13 shards (12 full, the last of 8) and val 4. Enough shards for 16
# requests in flight, a cache budget of a few shards, and ranks x workers that do not divide them evenly; each
# shard (about 2.4 MB) is about L x B of one emulated connection (50 ms x 50 MB/s = 2.5 MB, the bytes it carries in
# one latency), so streaming a shard spends as long on its body as on its latency, which a 150 KB object pays in full.
SAMPLES_PER_SHARD = 16
# Upload time with 8 threads, `ci` (250 images, 38.6 MB, as objects and as 17 shards), boto3 1.44, to a fresh local
# `weed mini`: 1.67 s (median of 3: 1.08-1.89 s), and 0.02 s for a call that finds the bucket up to date; the
# server's RSS grew from 135 to 281-333 MiB (under the CPU lock, on the 2-core 24 GiB development machine without a
# GPU, 2026-11-28). `workshop` (9,000 + 1,000 images: 10,629 objects, 2.3 GB in the server's folder): 66.7 s, and
# 0.12 s for a call that finds it up to date; the server's RSS peaked at 632 MiB (one run under the CPU lock on a
# 2-core machine of the same kind, others' work beside it at a load average of about 7, 2026-12-07).
UPLOAD_THREADS = 8
MARKER_KEY = "loaderlab-dataset.json"
DELETE_BATCH = 1000  # DeleteObjects' limit per request


@dataclass(frozen=True)
class StoredSample:
    """One entry of a split's index: a sample in the bucket, as an object and as bytes inside a shard. (The
    exercises' `RemoteSample` is another thing: what a learner's reader yields, the bytes themselves.)"""

    key: str         # "circles/circles_000003", as in the shards
    label: int
    object_key: str  # "images-3/train/circles/circles_000003.jpg"
    shard_key: str   # "shards/train/shard-00000.tar"
    offset: int      # where the image's bytes start in the shard
    size: int        # how many bytes they are (the file's size)

    @property
    def relative_path(self) -> str:
        """Its file in the local split's folder, "<class>/<file>" (the object key without prefix and split)."""
        return self.object_key.split("/", 2)[2]


@dataclass(frozen=True)
class RemoteSplit:
    """A split's index, typed: its samples (in `list_samples` order, the shards' order), shard keys and index key.
    Every reader of the index uses this type; `remote_split` is the one reader of the index document."""

    samples: tuple[StoredSample, ...]
    shard_keys: tuple[str, ...]
    index_key: str

    def samples_of(self, shard_key: str) -> tuple[StoredSample, ...]:
        """The samples of one shard, in the shard's order."""
        return tuple(sample for sample in self.samples if sample.shard_key == shard_key)

    def by_key(self) -> dict[str, StoredSample]:
        """Every sample by its key in the shards."""
        return {sample.key: sample for sample in self.samples}


@dataclass(frozen=True)
class RemoteDataset:
    """A dataset profile in the server: its bucket and, per split, every sample's keys. `uploaded_objects` is how
    many objects the call that returned it put (0 when the bucket was already up to date)."""

    profile: str
    bucket: str
    splits: Mapping[str, RemoteSplit]
    uploaded_objects: int = 0

    def local_file(self, split: str, sample: StoredSample) -> Path:
        """The local file whose bytes `sample` holds (the dataset `profile` on this machine)."""
        return dataset_dir(self.profile) / split / sample.relative_path


def bucket_name(profile: str) -> str:
    return f"loaderlab-{profile}"


def object_key(split: str, position: int, relative: str) -> str:
    """The object of the split's `position`-th sample, `relative` = "<class>/<file>"."""
    return f"images-{position % IMAGE_PREFIXES}/{split}/{relative}"


def shard_prefix(split: str) -> str:
    return f"shards/{split}/"


def index_key(split: str) -> str:
    return f"{shard_prefix(split)}index.json"


def dataset_fingerprint(root: Path) -> str:
    """What an upload depends on: the dataset's description and manifest (every file's sha256) and this layout."""
    digest = hashlib.sha256(json.dumps({"layout": LAYOUT_VERSION, "splits": SPLITS, "prefixes": IMAGE_PREFIXES,
                                        "samples_per_shard": SAMPLES_PER_SHARD}, sort_keys=True).encode())
    for name in ("dataset.json", "manifest.csv"):
        digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    return digest.hexdigest()


def image_offsets(shard: Path) -> dict[str, tuple[int, int]]:
    """Each sample key's (offset, size) of its image member's bytes in the tar file `shard`."""
    offsets = {}
    with tarfile.open(shard) as tar:
        for member in tar.getmembers():
            key, _, suffix = member.name.rpartition(".")
            if suffix != LABEL_SUFFIX:
                offsets[key] = (member.offset_data, member.size)
    return offsets


def split_index(split: str, root: Path, shard_dir: Path) -> tuple[dict[str, Any], list[tuple[str, Path]]]:
    """Write the split's shards into `shard_dir`; return its index document and every (key, local file) to upload."""
    samples = list_samples(root / split)
    shards = write_tar_shards(root / split, shard_dir, SAMPLES_PER_SHARD, samples)
    uploads, entries, shard_entries = [], [], []
    for number, shard in enumerate(shards):
        key = shard_prefix(split) + SHARD_NAME.format(number)
        offsets = image_offsets(shard)
        chunk = samples[number * SAMPLES_PER_SHARD:(number + 1) * SAMPLES_PER_SHARD]
        shard_entries.append({"key": key, "bytes": shard.stat().st_size, "samples": len(chunk)})
        uploads.append((key, shard))
        for position, sample in enumerate(chunk, start=number * SAMPLES_PER_SHARD):
            name = sample_key(sample)
            offset, size = offsets[name]
            if size != sample.path.stat().st_size:
                raise RuntimeError(f"{shard}: {name} holds {size} bytes, its file {sample.path} "
                                   f"{sample.path.stat().st_size}")
            relative = f"{sample.path.parent.name}/{sample.path.name}"
            entries.append({"key": name, "label": sample.label, "object": object_key(split, position, relative),
                            "shard": key, "offset": offset, "size": size})
            uploads.append((entries[-1]["object"], sample.path))
    return {"layout_version": LAYOUT_VERSION, "split": split, "samples_per_shard": SAMPLES_PER_SHARD,
            "shards": shard_entries, "samples": entries}, uploads


def remote_split(split: str, index: Mapping[str, Any]) -> RemoteSplit:
    samples = tuple(StoredSample(entry["key"], entry["label"], entry["object"], entry["shard"], entry["offset"],
                                 entry["size"]) for entry in index["samples"])
    return RemoteSplit(samples, tuple(shard["key"] for shard in index["shards"]), index_key(split))


def _read_json(client: Any, bucket: str, key: str) -> Any | None:
    try:
        return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    except client.exceptions.NoSuchKey:
        return None


def _object_size(client: Any, bucket: str, key: str) -> int | None:
    from botocore.exceptions import ClientError

    try:
        return client.head_object(Bucket=bucket, Key=key)["ContentLength"]
    except ClientError:
        return None


def _reusable(client: Any, bucket: str, fingerprint: str) -> dict[str, Any] | None:
    """Each split's index, where the bucket holds this dataset whole (the module's docstring says what is checked);
    None where it must be uploaded again."""
    marker = _read_json(client, bucket, MARKER_KEY)
    if marker is None or marker.get("fingerprint") != fingerprint:
        return None
    indexes = {split: _read_json(client, bucket, index_key(split)) for split in SPLITS}
    for index in indexes.values():
        if not index or not index["shards"] or _object_size(client, bucket, index["shards"][-1]["key"]) != \
                index["shards"][-1]["bytes"]:
            return None
    return indexes


def _ensure_bucket(client: Any, bucket: str) -> None:
    existing = {entry["Name"] for entry in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)


def _empty_bucket(client: Any, bucket: str) -> None:
    keys = [entry["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for entry in page.get("Contents", [])]
    for start in range(0, len(keys), DELETE_BATCH):
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in
                                                                 keys[start:start + DELETE_BATCH]], "Quiet": True})


def _put_all(client: Any, bucket: str, uploads: Iterable[tuple[str, Path]]) -> int:
    def put(item: tuple[str, Path]) -> None:
        key, path = item
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        return sum(1 for _ in pool.map(put, uploads))


def upload_dataset(endpoint: Endpoint, profile: str) -> RemoteDataset:
    """The local dataset `profile` in bucket `loaderlab-<profile>` at `endpoint`, uploaded unless the bucket
    already holds this dataset in this layout (its marker's fingerprint matches). Raises DatasetMissing, naming the
    command that makes it, when the local dataset is absent."""
    root = dataset_dir(profile)
    bucket = bucket_name(profile)
    fingerprint = dataset_fingerprint(root)
    client = endpoint.client(max_pool_connections=UPLOAD_THREADS)
    try:
        _ensure_bucket(client, bucket)
        indexes = _reusable(client, bucket, fingerprint)
        if indexes is not None:
            return RemoteDataset(profile, bucket, {split: remote_split(split, index)
                                                   for split, index in indexes.items()})
        _empty_bucket(client, bucket)
        splits, uploaded = {}, 0
        with tempfile.TemporaryDirectory(prefix="loaderlab-shards-") as scratch:
            for split in SPLITS:
                index, uploads = split_index(split, root, Path(scratch) / split)
                uploaded += _put_all(client, bucket, uploads)
                client.put_object(Bucket=bucket, Key=index_key(split), Body=json.dumps(index).encode(),
                                  ContentType="application/json")
                splits[split] = remote_split(split, index)
                uploaded += 1
        described = json.loads((root / "dataset.json").read_text(encoding="utf-8")).get("parameters", {})
        client.put_object(Bucket=bucket, Key=MARKER_KEY, ContentType="application/json", Body=json.dumps(
            {"fingerprint": fingerprint, "profile": profile, "seed": described.get("seed"),
             "generator_version": described.get("generator_version"), "layout_version": LAYOUT_VERSION,
             "objects": uploaded + 1, "uploaded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode())
        return RemoteDataset(profile, bucket, splits, uploaded + 1)
    finally:
        client.close()
