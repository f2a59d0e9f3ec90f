"""Exercise 14, an answer: a remote shard reader with boto3 and threads.

Design choices:
- One boto3 client per reader, with short timeouts and few retries (`store_client`): botocore's defaults wait 60 s
  for a connection and retry a refused one for seconds, so a server that is not running would look like a hang.
- Every call to the store goes through `open_object`, which turns any failure into `RemoteReadError` naming the
  bucket, the key (and range) and the endpoint's URL: botocore's own messages say what ("NoSuchKey"), never where.
- `shard_samples` parses each shard with `tarfile` in stream mode ("r|") straight from the response body, so a
  shard is never held whole (`tar_samples`); a tar error, a body that breaks off, a sample without both members,
  or a stream that ends without the archive's two closing zero blocks (tarfile's loop ends quietly at a member's
  boundary) is a shard cut short, named.
- `fetch_in_flight` keeps a window of `in_flight` futures on a pool of `in_flight` threads and hands results on
  from the window's head: order kept, never more than `in_flight` requests open; its `finally` cancels what has
  not started and joins the pool, so a closed generator or an error leaves no thread behind.
- `ShardIndex` reads the index in its constructor and plans each `read` per shard: entries sorted by offset, merged
  while the gap to the next is at most `COALESCE_GAP_BYTES` (a tar header or two), one Range GET per run; the
  answer must be 206 with exactly the bytes asked for.
- `ShardCache` keeps an OrderedDict of the shards on disk (least recently used first) under one lock, and a Future
  per shard being fetched, so a second thread missing the same shard waits for the first. A miss downloads into
  memory, makes room, then writes the file: the folder never holds more than the budget. A failed fetch hands its
  error to every thread waiting on it, and is forgotten: the next get tries again. A shard's file is named after its
  whole key, quoted (`path_of`), never its basename alone.
"""

from __future__ import annotations

import json
import tarfile
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from loaderlab.storage.server import Endpoint

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0
ATTEMPTS = 2                 # a refused connection is tried twice, then reported
COALESCE_GAP_BYTES = 8192    # between two samples of a shard: headers, the .cls member, padding (ci: 3,584-4,095 bytes)
LABEL_SUFFIX = "cls"
END_OF_ARCHIVE_BYTES = 2 * tarfile.BLOCKSIZE   # two zero blocks close a tar archive


class RemoteSample(NamedTuple):
    """One sample read from the store."""

    key: str
    data: Any
    label: int


class RemoteReadError(RuntimeError):
    """A read from the store failed; the message names the bucket, the key and the endpoint."""


def store_client(endpoint: Endpoint, pool: int = 10) -> Any:
    """A boto3 client of the store with short timeouts and few retries, for up to `pool` threads at once."""
    return endpoint.client(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                           retries={"total_max_attempts": ATTEMPTS, "mode": "standard"}, max_pool_connections=pool)


def _where(endpoint: Endpoint, bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key} at {endpoint.url}"


def open_object(client: Any, endpoint: Endpoint, bucket: str, key: str,
                byte_range: tuple[int, int] | None = None) -> Any:
    """The GET's response (its Body still to read); any failure raised as RemoteReadError naming where."""
    kwargs = {"Bucket": bucket, "Key": key}
    if byte_range is not None:
        kwargs["Range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
    try:
        return client.get_object(**kwargs)
    except Exception as err:
        raise RemoteReadError(f"GET {_where(endpoint, bucket, key)}"
                              f"{'' if byte_range is None else ' ' + kwargs['Range']} failed: {err}") from err


def fetch_object(client: Any, endpoint: Endpoint, bucket: str, key: str) -> bytes:
    """The whole object's bytes, in one GET; any failure raised as RemoteReadError naming where."""
    response = open_object(client, endpoint, bucket, key)
    try:
        return response["Body"].read()
    except Exception as err:
        raise RemoteReadError(f"reading {_where(endpoint, bucket, key)} failed: {err}") from err


def _decoded(data: bytes, decode: Callable[[bytes], Any] | None) -> Any:
    return data if decode is None else decode(data)


# ---- step 1: shards, not objects ----------------------------------------------------------------------------------

def object_samples(endpoint: Endpoint, bucket: str, objects: Sequence[tuple[str, int]],
                   decode: Callable[[bytes], Any] | None = None) -> Iterator[RemoteSample]:
    """One sample per (object key, label), each object fetched in a GET of its own, one at a time, in this order."""
    client = store_client(endpoint)
    for key, label in objects:
        yield RemoteSample(key, _decoded(fetch_object(client, endpoint, bucket, key), decode), label)


def shard_samples(endpoint: Endpoint, bucket: str, shard_keys: Sequence[str],
                  decode: Callable[[bytes], Any] | None = None) -> Iterator[RemoteSample]:
    """Every sample of these tar shards, shard after shard, each in written order, each shard read in one GET."""
    client = store_client(endpoint)
    for shard in shard_keys:
        response = open_object(client, endpoint, bucket, shard)
        body = response["Body"]
        try:
            yield from tar_samples(body, response["ContentLength"], decode, _where(endpoint, bucket, shard))
        finally:
            body.close()


def tar_samples(stream: Any, size: int, decode: Callable[[bytes], Any] | None, where: str) -> Iterator[RemoteSample]:
    """The samples of one tar stream of `size` bytes, each yielded once its image and its label are read.

    tarfile ends its loop quietly when the stream ends at a member's boundary (or inside a header): only the two
    zero blocks that close an archive say it is whole, so a stream without them past its last member is cut short."""
    key, parts = None, {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                member_key, _, suffix = member.name.rpartition(".")
                if key is not None and member_key != key:
                    yield _sample(key, parts, decode, where)
                    parts = {}
                key = member_key
                parts[suffix] = tar.extractfile(member).read()
            end = tar.offset   # where the end-of-archive blocks start
    except RemoteReadError:
        raise
    except Exception as err:   # tarfile's errors, and a body that broke off (botocore's, urllib3's)
        raise RemoteReadError(f"shard {where} is cut short or not a tar ({type(err).__name__}: {err})") from err
    if end + END_OF_ARCHIVE_BYTES > size:
        raise RemoteReadError(f"shard {where} is cut short: it ends at byte {size:,}, without the end-of-archive "
                              f"blocks a tar closes with after its last member (at byte {end:,})")
    if key is not None:
        yield _sample(key, parts, decode, where)


def _sample(key: str, parts: dict[str, bytes], decode: Callable[[bytes], Any] | None, where: str) -> RemoteSample:
    images = [data for suffix, data in parts.items() if suffix != LABEL_SUFFIX]
    if LABEL_SUFFIX not in parts or len(images) != 1:
        raise RemoteReadError(f"shard {where}: sample {key!r} has members {sorted(parts)}, not an image and a "
                              f".{LABEL_SUFFIX}: the shard is cut short or malformed")
    return RemoteSample(key, _decoded(images[0], decode), int(parts[LABEL_SUFFIX]))


# ---- step 2: requests in flight -----------------------------------------------------------------------------------

def fetch_in_flight(endpoint: Endpoint, bucket: str, keys: Sequence[str], in_flight: int) -> Iterator[bytes]:
    """Each object's bytes, in the order of `keys`, with up to `in_flight` GETs open at once."""
    if in_flight < 1:
        raise ValueError(f"in_flight must be at least 1, got {in_flight}")
    client = store_client(endpoint, pool=in_flight)
    pool = ThreadPoolExecutor(in_flight, thread_name_prefix="ex14-fetch")
    window: deque[Future[bytes]] = deque()
    todo = iter(keys)
    try:
        for key in todo:
            window.append(pool.submit(fetch_object, client, endpoint, bucket, key))
            if len(window) == in_flight:
                break
        while window:
            data = window.popleft().result()
            for key in todo:  # refill the window before handing on: it stays full while the consumer works
                window.append(pool.submit(fetch_object, client, endpoint, bucket, key))
                break
            yield data
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---- step 3: an index, range reads --------------------------------------------------------------------------------

class Entry(NamedTuple):
    key: str
    label: int
    shard: str
    offset: int
    size: int


class ShardIndex:
    """Random access into the shards of one split, through its index."""

    def __init__(self, endpoint: Endpoint, bucket: str, index_key: str) -> None:
        self.endpoint, self.bucket = endpoint, bucket
        self.client = store_client(endpoint)
        raw = fetch_object(self.client, endpoint, bucket, index_key)
        try:
            self.entries = {row["key"]: Entry(row["key"], int(row["label"]), row["shard"], int(row["offset"]),
                                              int(row["size"])) for row in json.loads(raw)["samples"]}
        except (ValueError, KeyError, TypeError) as err:
            raise RemoteReadError(f"index {_where(endpoint, bucket, index_key)} does not parse: {err!r}") from err

    def read(self, keys: Sequence[str]) -> list[RemoteSample]:
        """The samples with these keys, in this order, as RemoteSample(key, the .jpg bytes, label)."""
        missing = [key for key in keys if key not in self.entries]
        if missing:
            raise KeyError(f"{len(missing)} keys are not in the index of s3://{self.bucket}: {missing[:3]}")
        by_shard: dict[str, list[Entry]] = {}
        for entry in {self.entries[key] for key in keys}:
            by_shard.setdefault(entry.shard, []).append(entry)
        data: dict[str, bytes] = {}
        for shard, entries in by_shard.items():
            for run in coalesced_runs(sorted(entries, key=lambda e: e.offset)):
                start, end = run[0].offset, max(e.offset + e.size for e in run)
                chunk = self.read_range(shard, start, end, run)
                for entry in run:
                    data[entry.key] = chunk[entry.offset - start: entry.offset - start + entry.size]
        return [RemoteSample(key, data[key], self.entries[key].label) for key in keys]

    def read_range(self, shard: str, start: int, end: int, run: list[Entry]) -> bytes:
        """Bytes start..end - 1 of `shard` (the run's samples), in one Range GET: a 206 with exactly those bytes, or
        RemoteReadError naming where."""
        response = open_object(self.client, self.endpoint, self.bucket, shard, (start, end))
        status = response["ResponseMetadata"]["HTTPStatusCode"]
        where = f"{_where(self.endpoint, self.bucket, shard)} bytes {start}-{end - 1}"
        if status != 206:
            response["Body"].close()
            raise RemoteReadError(f"GET {where} was answered {status}, not 206 Partial Content: the server ignored "
                                  "the Range, and its body is not the sample's bytes")
        chunk = response["Body"].read()
        if len(chunk) != end - start:
            raise RemoteReadError(f"GET {where} returned {len(chunk)} bytes, not {end - start}: the index puts "
                                  f"sample {run[-1].key!r} past the end of shard {shard!r}")
        return chunk


def coalesced_runs(entries: list[Entry]) -> Iterator[list[Entry]]:
    """Entries sorted by offset, grouped into runs whose gaps are at most COALESCE_GAP_BYTES."""
    run: list[Entry] = []
    for entry in entries:
        if run and entry.offset - (run[-1].offset + run[-1].size) > COALESCE_GAP_BYTES:
            yield run
            run = []
        run.append(entry)
    if run:
        yield run


# ---- step 4: a local cache ----------------------------------------------------------------------------------------

class ShardCache:
    """Whole shards kept on local disk, within a byte budget, least recently used out first."""

    def __init__(self, endpoint: Endpoint, bucket: str, cache_dir: Path | str, budget_bytes: int) -> None:
        self.endpoint, self.bucket, self.budget = endpoint, bucket, budget_bytes
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.client = store_client(endpoint)
        self.lock = threading.Lock()
        self.on_disk: OrderedDict[str, int] = OrderedDict()   # shard key -> bytes, least recently used first
        self.fetching: dict[str, Future[bytes]] = {}

    def path_of(self, shard_key: str) -> Path:
        """The file that holds a shard: its whole key, quoted (a name of its basename alone would give
        shards/train/shard-00000.tar and shards/val/shard-00000.tar one file)."""
        return self.cache_dir / quote(shard_key, safe="")

    def get(self, shard_key: str) -> bytes:
        """The shard's bytes: from cache_dir when there, else fetched once and kept."""
        with self.lock:
            if shard_key in self.on_disk:
                self.on_disk.move_to_end(shard_key)
                return self.path_of(shard_key).read_bytes()
            pending = self.fetching.get(shard_key)
            if pending is None:
                mine = self.fetching[shard_key] = Future()
        if pending is not None:
            return pending.result()   # the fetch's bytes, or its error: a waiter never outlives a failed fetch
        try:
            data = self.download(shard_key)
            self.keep(shard_key, data)
        except BaseException as err:
            mine.set_exception(err)
            raise
        finally:
            with self.lock:
                del self.fetching[shard_key]   # a failed fetch is not kept: the next get tries again
        mine.set_result(data)
        return data

    def download(self, shard_key: str) -> bytes:
        """The shard's bytes, from the store (into memory: nothing is written in cache_dir before room is made)."""
        return fetch_object(self.client, self.endpoint, self.bucket, shard_key)

    def keep(self, shard_key: str, data: bytes) -> None:
        """Write the shard in cache_dir, once the least recently used have been removed until it fits."""
        if len(data) > self.budget:
            raise ValueError(f"shard {shard_key!r} is {len(data):,} bytes, more than the cache's whole budget of "
                             f"{self.budget:,} bytes")
        with self.lock:
            while sum(self.on_disk.values()) + len(data) > self.budget:
                oldest, _ = self.on_disk.popitem(last=False)
                self.path_of(oldest).unlink()
            self.path_of(shard_key).write_bytes(data)
            self.on_disk[shard_key] = len(data)
