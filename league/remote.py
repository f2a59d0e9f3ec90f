"""The league from object storage: `python -m league --source s3` (`make league SOURCE=s3`).

The same work as the local league (read, decode, 256 resize + 224 centre crop, uint8 batches of 64 with labels), with
the bytes coming from module 10's S3 server through one emulating proxy for the whole run (`storage_session`: the
run's server, the profile's dataset uploaded when the bucket lacks it), profile `region` (50 ms first-byte latency,
50 MB/s per connection, 200 MB/s in all, 150 GETs/s per prefix). The league reads the first `images` samples of the
split (all of it by default), named in an index of its own in the bucket (`league/<split>-<n>.json`, the split's
index cut to them, so exercise 15's `RemoteEpochs` reads them too).

Each entry is gated first in its own process (`league.table.gate`: every sample once, its label, the pixels of a
few images within the course's tolerance of the reference crop of the local file), then timed in a fresh process per
round, rounds interleaved in a rotated order, as the local league: a warm-up of two batches, then the proxy's counters
reset and one full pass timed from the loader's construction; the proxy's requests and body bytes over that pass,
per image, stand beside the speed.

Two ceilings, every row its share of each: the network's, the profile's total bandwidth over the mean bytes of an
image (what a loader with enough requests in flight could receive; per-request latency is each entry's own
problem), and the local full-decode ceiling (`decode-only`, Pillow on a thread per core, on the same images read
from the local disk); the lower of the two is the one the course's best loader is measured against. Beside them,
`local-crop` and `local-decode-less`: the crops the course's remote loaders use (ex04's draft crop, ex01 step 5's
decode-less crop) on the same local files, a batch on threads, the same work with a network that costs nothing, so a
row's distance to the decode ceiling splits into the crop's share and the network's.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import statistics
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from loaderlab.images import Sample, draft_center_crop, linked_split, list_samples
from loaderlab.machine import usable_cores
from loaderlab.storage.bucket import RemoteSplit, index_key, remote_split
from loaderlab.storage.server import Endpoint
from loaderlab.tar_shards import LABEL_SUFFIX

from league.entries import BATCH, CEILING, PEERS_COMMAND, SOLUTIONS_NOTE, Entry, Reiterable, Setup, peer_pin
from league.table import Row, child_result, entry_builder, gate, gate_all, outcome, rotated

NETWORK_PROFILE = "region"
SPLIT = "train"
LEAGUE_INDEX_PREFIX = "league/"
SHARDS_IN_FLIGHT = 8     # whole shards (16 samples, ~2.4 MB) in flight: 8 x 24 MB/s per stream (50 ms + 48 ms at
                         # 50 MB/s) is about the profile's 200 MB/s
OBJECTS_IN_FLIGHT = 32   # per-object GETs in flight: 32 x 19 GETs/s (50 ms + 3 ms) = 600, the 4 prefixes' 4 x 150
PRESIGN_EXPIRES_S = 3600


# ---- the setup every remote entry gets -------------------------------------------------------------------------

@dataclass(frozen=True)
class RemoteSetup:
    """The league's selection in the bucket, reached through the proxy, and the same images on the local disk (the
    gate's reference and the decode ceiling's input). A child process reads it from the file `write_setup` wrote."""

    endpoint: Endpoint       # the proxy's URL with the server's keys: every entry's requests go through it
    bucket: str
    selection: RemoteSplit   # the league's index (bucket.py's, cut to the selection) and its key in the bucket
    root: str                # the selection's local files (an ImageFolder tree of links)
    batch_size: int = BATCH

    def keys(self) -> frozenset[str]:
        return frozenset(sample.key for sample in self.selection.samples)

    @classmethod
    def load(cls, path: Path) -> RemoteSetup:
        """The setup `write_setup` wrote to `path`."""
        data = json.loads(path.read_text())
        selection = replace(remote_split(SPLIT, data["index"]), index_key=data["index_key"])
        return cls(Endpoint.from_env(data["endpoint"]), data["bucket"], selection, data["root"], data["batch_size"])


def write_setup(path: Path, endpoint: Endpoint, bucket: str, key: str, index: dict[str, Any],
                root: Path) -> None:
    """Write the setup of a child process to `path` (only this user may read it: it holds the server's keys): the
    endpoint as its one serialisation (`Endpoint.env()`), the league's index document as the bucket holds it at
    `key`, the local tree of links `root`."""
    path.touch(mode=0o600)
    path.write_text(json.dumps({"endpoint": endpoint.env(), "bucket": bucket, "index_key": key, "index": index,
                                "root": str(root), "batch_size": BATCH}))


# ---- shared pieces: tar members, decoding threads ---------------------------------------------------------------

def tar_samples(data: bytes) -> Iterator[tuple[str, bytes, int]]:
    """(key, image bytes, label) of each sample of a tar shard in bucket.py's layout (an image and a .cls member)."""
    parts: dict[str, dict[str, bytes]] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            key, _, suffix = member.name.rpartition(".")
            parts.setdefault(key, {})[suffix] = tar.extractfile(member).read()
    for key, members in parts.items():
        label = members.pop(LABEL_SUFFIX)
        (image,) = members.values()
        yield key, image, int(label)


def crop_bytes(data: bytes) -> np.ndarray:
    """The course's crop (exercise 01's draft-mode decode) of an image's bytes, uint8 CHW."""
    return draft_center_crop(io.BytesIO(data)).transpose(2, 0, 1)


def decoded_batches(items: Iterable[tuple[str, bytes, int]], batch_size: int,
                    decode: Callable[[bytes], np.ndarray] = crop_bytes) -> Iterator[tuple[np.ndarray, np.ndarray, list[str]]]:
    """Batches (uint8 NCHW, labels, keys) of `items` decoded on a thread per usable core while the next items arrive
    (two batches of decodes in flight at most)."""
    with ThreadPoolExecutor(usable_cores(), thread_name_prefix="league-decode") as pool:
        pending: deque[tuple[str, int, Future[np.ndarray]]] = deque()

        def batch(size: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
            taken = [pending.popleft() for _ in range(size)]
            return (np.stack([f.result() for _, _, f in taken]), np.array([label for _, label, _ in taken]),
                    [key for key, _, _ in taken])

        for key, data, label in items:
            pending.append((key, label, pool.submit(decode, data)))
            if len(pending) >= 2 * batch_size:
                yield batch(batch_size)
        while pending:
            yield batch(min(batch_size, len(pending)))


# ---- the course's loaders ---------------------------------------------------------------------------------------

def _ex14_shards(module: Any, setup: RemoteSetup,
                 decode: Callable[[bytes], np.ndarray] = crop_bytes) -> Iterable[Any]:
    wanted = setup.keys()

    def samples() -> Iterator[tuple[str, bytes, int]]:
        shards = module.fetch_in_flight(setup.endpoint, setup.bucket, setup.selection.shard_keys, SHARDS_IN_FLIGHT)
        for data in shards:
            yield from (sample for sample in tar_samples(data) if sample[0] in wanted)

    return Reiterable(lambda: decoded_batches(samples(), setup.batch_size, decode))


def _ex14_objects(module: Any, setup: RemoteSetup) -> Iterable[Any]:
    def samples() -> Iterator[tuple[str, bytes, int]]:
        samples = setup.selection.samples
        objects = module.fetch_in_flight(setup.endpoint, setup.bucket, [s.object_key for s in samples],
                                         OBJECTS_IN_FLIGHT)
        for sample, data in zip(samples, objects):
            yield sample.key, data, sample.label

    return Reiterable(lambda: decoded_batches(samples(), setup.batch_size))


def ex14_shards_solution(setup: RemoteSetup) -> Iterable[Any]:
    """Exercise 14's solution: `fetch_in_flight` over the shard keys (8 whole shards in flight), each shard's tar
    read in memory, the course's crop on a thread per core."""
    import solutions.ex14_remote_shards as module

    return _ex14_shards(module, setup)


def ex14_shards_decode_less(setup: RemoteSetup) -> Iterable[Any]:
    """The course's best: exercise 14's `fetch_in_flight` of whole shards, cropped by exercise 01's step-5 solution
    (`decode_less_crop`: a DCT-scaled decode of the crop's window) on a thread per core."""
    import solutions.ex14_remote_shards as module
    from solutions.ex01_profile_and_fix import decode_less_crop

    return _ex14_shards(module, setup, lambda data: decode_less_crop(data).transpose(2, 0, 1))


def ex14_objects_solution(setup: RemoteSetup) -> Iterable[Any]:
    """Exercise 14's solution: `fetch_in_flight` over the object keys (32 GETs in flight), the crop on threads."""
    import solutions.ex14_remote_shards as module

    return _ex14_objects(module, setup)


def ex14_shards_yours(setup: RemoteSetup) -> Iterable[Any]:
    """Your exercise 14's `fetch_in_flight` over the shard keys, as the solution's entry uses it."""
    import exercises.ex14_remote_shards as module

    return _ex14_shards(module, setup)


def _ex15(module: Any, setup: RemoteSetup) -> Iterable[Any]:
    def batches() -> Iterator[tuple[str, bytes, int]]:
        epochs = module.RemoteEpochs(setup.endpoint, setup.bucket, setup.selection.index_key, setup.batch_size,
                               num_workers=SHARDS_IN_FLIGHT, seed=0)
        epochs.set_epoch(0)
        for batch in epochs:
            yield from ((sample.key, sample.data, sample.label) for sample in batch)

    return Reiterable(lambda: decoded_batches(batches(), setup.batch_size))


def ex15_solution(setup: RemoteSetup) -> Iterable[Any]:
    """Exercise 15's `RemoteEpochs` (one rank, 8 reader threads, seed 0, epoch 0) over the league's index, its
    samples cropped on a thread per core."""
    import solutions.ex15_exactly_once as module

    return _ex15(module, setup)


def ex15_yours(setup: RemoteSetup) -> Iterable[Any]:
    """Your exercise 15's `RemoteEpochs`, as the solution's entry uses it."""
    import exercises.ex15_exactly_once as module

    return _ex15(module, setup)


# ---- what practitioners write -----------------------------------------------------------------------------------

def _tutorial_transform() -> Callable[[Any], Any]:
    from torchvision import transforms

    return transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()])


class _ObjectDataset:
    """Map-style dataset: one boto3 GET per sample in `__getitem__` (a client per worker process), Pillow + the
    tutorial's transforms to a uint8 CHW tensor."""

    def __init__(self, setup: RemoteSetup) -> None:
        self.setup, self.client, self.transform = setup, None, _tutorial_transform()

    def __len__(self) -> int:
        return len(self.setup.selection.samples)

    def __getitem__(self, index: int) -> tuple[Any, int, str]:
        from PIL import Image

        if self.client is None:
            self.client = self.setup.endpoint.client()
        sample = self.setup.selection.samples[index]
        data = self.client.get_object(Bucket=self.setup.bucket, Key=sample.object_key)["Body"].read()
        return self.transform(Image.open(io.BytesIO(data)).convert("RGB")), sample.label, sample.key

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"client": None}


def naive_objects(setup: RemoteSetup) -> Iterable[Any]:
    """The naive per-object DataLoader: `__getitem__` GETs its object with boto3 (botocore's default retries),
    decodes with Pillow, torchvision's Resize(256) + CenterCrop(224) + PILToTensor; batch 64, a worker per core."""
    from torch.utils.data import DataLoader

    return DataLoader(_ObjectDataset(setup), batch_size=setup.batch_size, num_workers=usable_cores())


def webdataset_http(setup: RemoteSetup) -> Iterable[Any]:
    """The `webdataset` library over the shards' HTTP URLs (presigned by boto3 for the proxy's address; webdataset
    opens an http URL with curl), decode("pil"), torchvision's Resize + CenterCrop + PILToTensor, batched, in a
    WebLoader with SHARDS_IN_FLIGHT workers (each worker its share of the shards, one shard at a time: the course's
    shard entries' requests in flight; a worker per core would keep only that many shards in flight)."""
    import webdataset as wds

    signer = setup.endpoint.client()
    urls = [signer.generate_presigned_url("get_object", Params={"Bucket": setup.bucket, "Key": key},
                                          ExpiresIn=PRESIGN_EXPIRES_S) for key in setup.selection.shard_keys]
    wanted = setup.keys()
    dataset = (wds.WebDataset(urls, shardshuffle=False).select(lambda sample: sample["__key__"] in wanted)
               .decode("pil").to_tuple("jpg;jpeg;png", "cls", "__key__")
               .map_tuple(_tutorial_transform(), int, str).batched(setup.batch_size, partial=True))
    return wds.WebLoader(dataset, batch_size=None, num_workers=min(SHARDS_IN_FLIGHT, len(urls)))


def obstore_objects(setup: RemoteSetup) -> Iterable[Any]:
    """obstore (Rust's object_store) as its docs write it: `get_async` of every object, 32 requests in flight on an
    asyncio loop (a semaphore), a batch's GETs gathered at once; the crop on a thread per core."""
    import obstore
    from obstore.store import S3Store

    endpoint = setup.endpoint
    store = S3Store(setup.bucket, endpoint=endpoint.url, access_key_id=endpoint.access_key,
                    secret_access_key=endpoint.secret_key, region=endpoint.region, virtual_hosted_style_request=False,
                    client_options={"allow_http": True})

    async def fetch(keys: Sequence[str]) -> list[bytes]:
        limit = asyncio.Semaphore(OBJECTS_IN_FLIGHT)

        async def one(key: str) -> bytes:
            async with limit:
                return bytes(await (await obstore.get_async(store, key)).bytes_async())

        return await asyncio.gather(*(one(key) for key in keys))

    def samples() -> Iterator[tuple[str, bytes, int]]:
        loop = asyncio.new_event_loop()
        try:
            step = 2 * setup.batch_size
            samples = setup.selection.samples
            for start in range(0, len(samples), step):
                chunk = samples[start : start + step]
                for sample, data in zip(chunk, loop.run_until_complete(fetch([s.object_key for s in chunk]))):
                    yield sample.key, data, sample.label
        finally:
            loop.close()

    return Reiterable(lambda: decoded_batches(samples(), setup.batch_size))


class _S3TarSamples:
    """An iterable dataset over s3torchconnector's readers of the shards: each shard read whole, its samples cropped."""

    def __init__(self, shards: Any, wanted: frozenset[str]) -> None:
        self.shards, self.wanted = shards, wanted

    def __iter__(self) -> Iterator[tuple[Any, int, str]]:
        import torch

        for reader in self.shards:
            for key, data, label in tar_samples(reader.read()):
                if key in self.wanted:
                    yield torch.from_numpy(np.ascontiguousarray(crop_bytes(data))), label, key


def s3torchconnector_shards(setup: RemoteSetup) -> Iterable[Any]:
    """AWS's s3torchconnector: `S3IterableDataset.from_objects` over the shard URIs (its CRT client, path-style, the
    proxy as endpoint, enable_sharding so each worker reads its own shards), each shard's tar read in the worker,
    the course's crop; a DataLoader with SHARDS_IN_FLIGHT workers, each reading one shard at a time (the course's
    shard entries' requests in flight)."""
    from s3torchconnector import S3ClientConfig, S3IterableDataset
    from torch.utils.data import DataLoader, IterableDataset

    endpoint = setup.endpoint
    os.environ |= {"AWS_ACCESS_KEY_ID": endpoint.access_key, "AWS_SECRET_ACCESS_KEY": endpoint.secret_key}
    shards = S3IterableDataset.from_objects([f"s3://{setup.bucket}/{key}" for key in setup.selection.shard_keys],
                                            region=endpoint.region, endpoint=endpoint.url, enable_sharding=True,
                                            s3client_config=S3ClientConfig(force_path_style=True))
    dataset = type("S3TarSamples", (_S3TarSamples, IterableDataset), {})(shards, setup.keys())
    return DataLoader(dataset, batch_size=setup.batch_size,
                      num_workers=min(SHARDS_IN_FLIGHT, len(setup.selection.shard_keys)))


# ---- the roster ---------------------------------------------------------------------------------------------------

S3TORCH_PIN = peer_pin("s3torchconnector")
# Peers that cannot be installed beside the lock's pins (requirements-peers.txt says the same): their rows read
# "not installed" with this reason.
S3FS_ABSENT = ("s3fs 2026.9.0 needs aiobotocore, whose newest release (3.10.0) requires botocore<1.43.118, and the "
               "lock pins botocore 1.44.8: no s3fs installs beside the lock")
MOSAIC_ABSENT = ("mosaicml-streaming 0.13.0 (the newest) requires numpy<2.2.0, and the lock pins numpy 2.4.6 (it "
                 "also pulls transformers, azure, oci and google-cloud-storage): it cannot install beside the lock")
REMOTE_ENTRIES = [
    Entry("ex14-shards-ex01", "ex14 solution's whole shards (8 in flight), ex01 step 5's decode-less crop on threads",
          "league.remote:ex14_shards_decode_less", requires=("solutions",), install=SOLUTIONS_NOTE),
    Entry("ex14-shards", "ex14 solution: fetch_in_flight of whole shards (8 in flight), crop on threads",
          "league.remote:ex14_shards_solution", requires=("solutions",), install=SOLUTIONS_NOTE),
    Entry("ex14-objects", "ex14 solution: fetch_in_flight of objects (32 in flight), crop on threads",
          "league.remote:ex14_objects_solution", requires=("solutions",), install=SOLUTIONS_NOTE),
    Entry("ex15", "ex15 solution: RemoteEpochs (1 rank, 8 reader threads), crop on threads",
          "league.remote:ex15_solution", requires=("solutions",), install=SOLUTIONS_NOTE),
    Entry("naive-objects", "naive DataLoader: a boto3 GET per sample in __getitem__, a worker per core (its default "
          "setting: as written, not tuned)",
          "league.remote:naive_objects", requires=("torch", "torchvision", "boto3")),
    Entry("webdataset-http", f"webdataset over presigned shard URLs (curl), {SHARDS_IN_FLIGHT} WebLoader workers",
          "league.remote:webdataset_http", requires=("webdataset", "torchvision")),
    Entry("obstore", "obstore get_async of objects (32 in flight), crop on threads", "league.remote:obstore_objects",
          requires=("obstore",)),
    Entry("s3torchconnector", f"s3torchconnector S3IterableDataset over the shards, {SHARDS_IN_FLIGHT} DataLoader "
          "workers",
          "league.remote:s3torchconnector_shards", requires=("s3torchconnector", "torch"),
          install=f"{PEERS_COMMAND} (pip install {S3TORCH_PIN}; Linux wheels only)"),
    Entry("s3fs", "s3fs (fsspec)", "", requires=("s3fs",), install=f"not installable here: {S3FS_ABSENT}"),
    Entry("mosaic-streaming", "MosaicML Streaming (MDS shards)", "", requires=("streaming",),
          install=f"not installable here: {MOSAIC_ABSENT}"),
    Entry("yours-ex14", "your ex14's fetch_in_flight of whole shards", "league.remote:ex14_shards_yours",
          learner=True, requires=()),
    Entry("yours-ex15", "your ex15's RemoteEpochs", "league.remote:ex15_yours", learner=True, requires=()),
]
# What each entry keeps in flight (GETs at once through the proxy, at most): every remote entry that reads shards keeps
# SHARDS_IN_FLIGHT of them, every one that reads objects OBJECTS_IN_FLIGHT, except the naive DataLoader (a worker per
# core, as the tutorials write it). The table prints it beside each row.
IN_FLIGHT = {"ex14-shards-ex01": f"{SHARDS_IN_FLIGHT} shards", "ex14-shards": f"{SHARDS_IN_FLIGHT} shards",
             "ex14-objects": f"{OBJECTS_IN_FLIGHT} objects", "ex15": f"{SHARDS_IN_FLIGHT} ranges",
             "naive-objects": f"{usable_cores()} objects", "webdataset-http": f"{SHARDS_IN_FLIGHT} shards",
             "obstore": f"{OBJECTS_IN_FLIGHT} objects", "s3torchconnector": f"{SHARDS_IN_FLIGHT} shards",
             "yours-ex14": f"{SHARDS_IN_FLIGHT} shards", "yours-ex15": f"{SHARDS_IN_FLIGHT} ranges"}
# The same crop on the same images read from the local disk: what the course's remote loaders would reach with a
# network that costs nothing (their decode is this crop), beside the decode ceiling that the crop itself stays under.
LOCAL_CROP = Entry("local-crop", "local reference: the same crop (ex04's draft crop), a batch on threads, local files",
                   "league.entries:thread_batches_main")
# The course's best remote loader's crop on the local files: what `ex14-shards-ex01` would reach with a free network.
LOCAL_DECODE_LESS = Entry("local-decode-less", "local reference: ex01 step 5's decode-less crop, a batch on threads, "
                          "local files", "league.entries:ex01_decode_less_threads", requires=("solutions",),
                          install=SOLUTIONS_NOTE)
LOCAL_REFERENCES = (LOCAL_CROP, LOCAL_DECODE_LESS)
LOCAL_ROWS = (CEILING, *LOCAL_REFERENCES)
REMOTE_BY_NAME = {e.name: e for e in [*LOCAL_ROWS, *REMOTE_ENTRIES]}


# ---- one entry in its own process -------------------------------------------------------------------------------

def run_remote_child(entry: Entry, setup: RemoteSetup, mode: str) -> dict[str, Any]:
    """In the entry's own process: `check` gates one pass; `time` warms up (two batches), resets the proxy's counters,
    times one full pass from the loader's construction and reads the counters. The ceiling reads the local files."""
    from loaderlab.bench import count_batch, measure
    from loaderlab.storage.netem import Network

    build = entry_builder(entry)
    local = Setup(Path(setup.root), Path(setup.root), setup.batch_size)
    source = local if entry in LOCAL_ROWS else setup

    def run() -> dict[str, Any]:
        if mode == "check":
            return {"status": "passed", "note": gate(build(source), list_samples(setup.root), setup.batch_size)}
        network = Network(setup.endpoint.url)
        measure(lambda: build(source), count=count_batch, max_items=2 * setup.batch_size)
        network.reset()
        timed = measure(lambda: build(source), count=count_batch)
        stats = network.stats()
        return {"status": "timed", "items": timed.items, "seconds": timed.seconds, "requests": stats.requests,
                "bytes": stats.bytes_sent}

    return outcome(entry, run)


def in_child(entry: Entry, setup_file: Path, mode: str) -> dict[str, Any]:
    """One gate or timed pass of `entry` in a fresh process."""
    return child_result(["remote", entry.name, mode, "--setup", str(setup_file)])


# ---- the league ---------------------------------------------------------------------------------------------------

@dataclass
class RemoteRow(Row):
    """A league row (status also "reference": the local rows of the same crops) with the proxy's counts per image of each timed pass."""

    requests_per_image: list[float] = field(default_factory=list)
    bytes_per_image: list[float] = field(default_factory=list)
    in_flight: str = ""   # IN_FLIGHT's entry: the GETs it keeps at once


def league_index(index: dict[str, Any], images: int | None) -> dict[str, Any]:
    """The split's index cut to its first `images` samples (all with None) and the shards that hold them."""
    samples = index["samples"][:images]
    shards = {s["shard"] for s in samples}
    return index | {"samples": samples, "shards": [s for s in index["shards"] if s["key"] in shards]}


def run_remote_league(profile: str, rounds: int, images: int | None, names: list[str],
                      log: Callable[[str], None] = print,
                      run_entry: Callable[[Entry, Path, str], dict[str, Any]] = in_child) -> dict[str, Any]:
    """Gate every entry, then time those that pass over `rounds` interleaved rounds, all through one proxy; the
    league as a dict (the settings, the ceilings, each row with its speeds and the proxy's counts per image)."""
    from loaderlab.storage.netem import PROFILES
    from loaderlab.storage.session import storage_session

    entries = [REMOTE_BY_NAME[n] for n in names]
    rows = {e.name: RemoteRow(e.name, e.title, "ceiling" if e is CEILING else "reference" if e in LOCAL_REFERENCES
                              else "ranked", yours=e.learner, in_flight=IN_FLIGHT.get(e.name, "")) for e in entries}
    network_profile = PROFILES[NETWORK_PROFILE]
    with storage_session(NETWORK_PROFILE, profile) as storage:
        client = storage.server.client()
        try:
            index = league_index(json.loads(client.get_object(Bucket=storage.bucket, Key=index_key(SPLIT))["Body"]
                                            .read()), images)
            key = f"{LEAGUE_INDEX_PREFIX}{SPLIT}-{len(index['samples'])}.json"
            client.put_object(Bucket=storage.bucket, Key=key, Body=json.dumps(index).encode())
        finally:
            client.close()
        selection = remote_split(SPLIT, index).samples
        local = [Sample(storage.dataset.local_file(SPLIT, sample), sample.label) for sample in selection]
        mean_bytes = statistics.fmean(sample.size for sample in selection)
        with linked_split(local) as (root, _), tempfile.TemporaryDirectory(prefix="loaderlab-league-s3-") as work:
            setup_file = Path(work) / "setup.json"
            write_setup(setup_file, storage.endpoint, storage.bucket, key, index, root)
            timed = gate_all(entries, rows, lambda entry: run_entry(entry, setup_file, "check"), (CEILING,), log)
            for number in range(rounds):
                for entry in rotated(timed, number):
                    result = run_entry(entry, setup_file, "time")
                    row = rows[entry.name]
                    if result["status"] not in ("timed", "rejected"):
                        row.status, row.note = result["status"], result.get("note", "")
                        continue
                    row.images_per_s.append(result["items"] / result["seconds"])
                    row.requests_per_image.append(result["requests"] / result["items"])
                    row.bytes_per_image.append(result["bytes"] / result["items"])
                log(f"  round {number + 1}/{rounds} done")
    network_ceiling = network_profile.total_bytes_per_s / mean_bytes
    decode_ceiling = rows[CEILING.name].median if CEILING.name in rows else None
    return {"source": "s3", "profile": profile, "split": SPLIT, "network_profile": asdict(network_profile),
            "rounds": rounds, "images": len(local), "mean_bytes_per_image": mean_bytes, "batch_size": BATCH,
            "cores": usable_cores(), "date": time.strftime("%Y-%m-%d"), "versions": peer_versions(),
            "network_ceiling": network_ceiling, "decode_ceiling": decode_ceiling,
            "ceiling": min(filter(None, (network_ceiling, decode_ceiling))),
            "rows": [asdict(r) | {"median": r.median} for r in rows.values()]}


def peer_versions() -> dict[str, str]:
    """The installed version of each client the remote league compares (absent ones left out)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for project in ("boto3", "botocore", "obstore", "webdataset", "s3torchconnector", "s3fs", "mosaicml-streaming"):
        try:
            found[project] = version(project)
        except PackageNotFoundError:
            pass
    return found


def table(league: dict[str, Any]) -> str:
    """The remote league as text: ranked rows by median, then the ceilings, then what was not ranked and why; each
    row's share of the network ceiling, of the local decode ceiling, and the proxy's requests and kB per image."""
    net, decode = league["network_ceiling"], league["decode_ceiling"]
    profile = league["network_profile"]
    lines = [f"League from S3 on '{league['profile']}' ({league['split']}): {league['images']} images, "
             f"{league['rounds']} round(s), {league['cores']} usable cores, {league['date']}; network "
             f"'{profile['name']}': {profile['latency_s'] * 1e3:.0f} ms, {profile['connection_bytes_per_s'] / 1e6:.0f} "
             f"MB/s a connection, {profile['total_bytes_per_s'] / 1e6:.0f} MB/s in all, "
             f"{profile['prefix_gets_per_s']:.0f} GET/s a prefix; {league['mean_bytes_per_image'] / 1e3:.1f} kB an image",
             f"{'entry':<17} {'img/s':>7} {'spread':>10} {'of net':>7} {'of dec':>7} {'req/img':>8} {'kB/img':>7} "
             f"{'in flight':>11}  note"]
    rows = league["rows"]
    ranked = sorted((r for r in rows if r["status"] in ("ranked", "reference", "ceiling") and r["median"]),
                    key=lambda r: (r["status"] != "ranked", -r["median"]))

    def figures(r: dict[str, Any]) -> str:
        if not r["median"]:
            return f"{'-':>7} {'-':>10} {'-':>7} {'-':>7} {'-':>8} {'-':>7} {'-':>11}"
        shares = " ".join(f"{r['median'] / c:>7.0%}" if c else f"{'-':>7}" for c in (net, decode))
        counts = (f"{statistics.median(r['requests_per_image']):>8.3f} "
                  f"{statistics.median(r['bytes_per_image']) / 1e3:>7.1f}" if r["requests_per_image"] and
                  r["status"] == "ranked" else f"{'-':>8} {'-':>7}")
        spread = f"{min(r['images_per_s']):.0f}-{max(r['images_per_s']):.0f}"
        return f"{r['median']:>7.0f} {spread:>10} {shares} {counts} {r.get('in_flight') or '-':>11}"

    for r in ranked:
        lines.append(f"{r['name']:<17} {figures(r)}  {r['title']}" + (f" ({r['note']})" if r["note"] else ""))
    lines.append(f"{'network ceiling':<17} {net:>7.0f} {'':>10} {'100%':>7}  total bandwidth / mean bytes an image")
    lines.append("not ranked:")
    for r in rows:
        if r not in ranked:
            lines.append(f"{r['name']:<17} {figures(r)}  {r['status']}: {r['note']}")
    return "\n".join(lines)
