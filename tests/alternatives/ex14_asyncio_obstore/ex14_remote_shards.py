"""Exercise 14, a correct alternative: obstore and asyncio instead of boto3 and threads.

obstore's own errors name the URL of the request but not always the key (its "non-partial response" error names
nothing), so every call goes through `_call`, which names the bucket, the key and the endpoint. Its default client
retries for up to 3 minutes: the store is made with a short retry budget and timeouts. `get_ranges` is not used: it
merges ranges up to 1 MiB apart, fetching the samples between them too; each run of neighbours is its own
`get_range_async`, all of a read's runs at once. Neighbours are found by their places in the index (one after the
other in one shard), not by a byte gap.
"""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
import threading
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import obstore
from obstore.store import S3Store

from loaderlab.storage.server import Endpoint

T = TypeVar("T")
LABEL_SUFFIX = "cls"


class RemoteSample(NamedTuple):
    key: str
    data: Any
    label: int


def _store(endpoint: Endpoint, bucket: str) -> S3Store:
    return S3Store(bucket, endpoint=endpoint.url, access_key_id=endpoint.access_key,
                   secret_access_key=endpoint.secret_key, region=endpoint.region, virtual_hosted_style_request=False,
                   client_options={"allow_http": True, "timeout": "10s", "connect_timeout": "3s"},
                   retry_config={"max_retries": 1, "retry_timeout": timedelta(seconds=5),
                                 "backoff": {"init_backoff": timedelta(milliseconds=100),
                                             "max_backoff": timedelta(seconds=1), "base": 2}})


def _call(what: str, endpoint: Endpoint, bucket: str, key: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except Exception as err:
        raise RuntimeError(f"{what} s3://{bucket}/{key} at {endpoint.url}: {err}") from err


async def _acall(what: str, endpoint: Endpoint, bucket: str, key: str, call: Awaitable[T]) -> T:
    try:
        return await call
    except Exception as err:
        raise RuntimeError(f"{what} s3://{bucket}/{key} at {endpoint.url}: {err}") from err


def object_samples(endpoint: Endpoint, bucket: str, objects: Sequence[tuple[str, int]],
                   decode: Callable[[bytes], Any] | None = None) -> Iterator[RemoteSample]:
    store = _store(endpoint, bucket)
    for key, label in objects:
        data = _call("GET", endpoint, bucket, key, lambda: bytes(obstore.get(store, key).bytes()))
        yield RemoteSample(key, data if decode is None else decode(data), label)


class _Chunks(io.RawIOBase):
    """A stream of byte chunks as a readable file (what tarfile's stream mode reads)."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self.chunks, self.left = chunks, memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.left:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.left = memoryview(bytes(chunk))
        size = min(len(buffer), len(self.left))
        buffer[:size] = self.left[:size]
        self.left = self.left[size:]
        return size


def shard_samples(endpoint: Endpoint, bucket: str, shard_keys: Sequence[str],
                  decode: Callable[[bytes], Any] | None = None) -> Iterator[RemoteSample]:
    store = _store(endpoint, bucket)
    for shard in shard_keys:
        result = _call("GET", endpoint, bucket, shard, lambda: obstore.get(store, shard))
        where = f"shard s3://{bucket}/{shard} at {endpoint.url}"
        stream = io.BufferedReader(_Chunks(iter(result.stream(min_chunk_size=1 << 16))), 1 << 16)
        members: dict[str, dict[str, bytes]] = {}
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    key, _, suffix = member.name.rpartition(".")
                    members.setdefault(key, {})[suffix] = tar.extractfile(member).read()
                    if len(members[key]) == 2:
                        yield _sample(key, members.pop(key), decode, where)
                closing = tar.offset   # tarfile stops quietly where the stream ends at a member's boundary
        except Exception as err:
            raise RuntimeError(f"{where} is cut short or unreadable: {err}") from err
        if members:
            raise RuntimeError(f"{where}: samples {sorted(members)} lack a member: the shard is cut short")
        if closing + 2 * tarfile.BLOCKSIZE > result.meta["size"]:
            raise RuntimeError(f"{where} is cut short: no end-of-archive blocks after its last member")


def _sample(key: str, parts: dict[str, bytes], decode: Callable[[bytes], Any] | None, where: str) -> RemoteSample:
    images = [data for suffix, data in parts.items() if suffix != LABEL_SUFFIX]
    if LABEL_SUFFIX not in parts or len(images) != 1:
        raise RuntimeError(f"{where}: sample {key!r} has members {sorted(parts)}")
    return RemoteSample(key, images[0] if decode is None else decode(images[0]), int(parts[LABEL_SUFFIX]))


class _Loop:
    """An asyncio event loop running in a thread of its own until close(), which cancels its tasks and joins it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ex14-event-loop", daemon=True)
        self.thread.start()

    def submit(self, coroutine: Awaitable[T]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.submit(cancel_all()).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def fetch_in_flight(endpoint: Endpoint, bucket: str, keys: Sequence[str], in_flight: int) -> Iterator[bytes]:
    if in_flight < 1:
        raise ValueError(f"in_flight must be at least 1, got {in_flight}")
    store = _store(endpoint, bucket)

    async def fetch(key: str) -> bytes:
        result = await _acall("GET", endpoint, bucket, key, obstore.get_async(store, key))
        return bytes(await _acall("GET", endpoint, bucket, key, result.bytes_async()))

    loop = _Loop()
    try:
        todo = iter(keys)
        window = deque(loop.submit(fetch(key)) for _, key in zip(range(in_flight), todo))
        while window:
            data = window.popleft().result()
            window.extend(loop.submit(fetch(key)) for _, key in zip(range(1), todo))
            yield data
    finally:
        loop.close()


class _Entry(NamedTuple):
    place: int        # in the index: neighbours in a shard are one place apart
    key: str
    label: int
    shard: str
    offset: int
    size: int


class ShardIndex:
    def __init__(self, endpoint: Endpoint, bucket: str, index_key: str) -> None:
        self.endpoint, self.bucket = endpoint, bucket
        self.store = _store(endpoint, bucket)
        raw = _call("GET", endpoint, bucket, index_key, lambda: bytes(obstore.get(self.store, index_key).bytes()))
        self.entries = {row["key"]: _Entry(place, row["key"], row["label"], row["shard"], row["offset"], row["size"])
                        for place, row in enumerate(json.loads(raw)["samples"])}

    def read(self, keys: Sequence[str]) -> list[RemoteSample]:
        wanted = sorted({self.entries[key] for key in keys})
        runs: list[list[_Entry]] = []
        for entry in wanted:
            last = runs[-1][-1] if runs else None
            if last is not None and last.shard == entry.shard and entry.place == last.place + 1:
                runs[-1].append(entry)
            else:
                runs.append([entry])
        chunks = asyncio.run(self._fetch(runs))
        data = {}
        for run, chunk in zip(runs, chunks):
            for entry in run:
                data[entry.key] = chunk[entry.offset - run[0].offset:entry.offset - run[0].offset + entry.size]
        return [RemoteSample(key, data[key], self.entries[key].label) for key in keys]

    async def _fetch(self, runs: list[list[_Entry]]) -> list[bytes]:
        async def one(run: list[_Entry]) -> bytes:
            shard, start, end = run[0].shard, run[0].offset, run[-1].offset + run[-1].size
            chunk = bytes(await _acall(f"GET bytes {start}-{end - 1} of", self.endpoint, self.bucket, shard,
                                       obstore.get_range_async(self.store, shard, start=start, end=end)))
            if len(chunk) != end - start:
                raise RuntimeError(f"s3://{self.bucket}/{shard} at {self.endpoint.url} holds {len(chunk)} of the "
                                   f"{end - start} bytes the index gives for {[e.key for e in run]}: the index "
                                   "points past the shard's end")
            return chunk

        return list(await asyncio.gather(*(one(run) for run in runs)))


class ShardCache:
    def __init__(self, endpoint: Endpoint, bucket: str, cache_dir: Path | str, budget_bytes: int) -> None:
        self.endpoint, self.bucket, self.budget = endpoint, bucket, budget_bytes
        self.folder = Path(cache_dir)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.store = _store(endpoint, bucket)
        self.lock = threading.Lock()
        self.sizes: OrderedDict[str, int] = OrderedDict()
        self.arriving: dict[str, threading.Event] = {}

    def _path(self, key: str) -> Path:
        return self.folder / key.replace("/", "%2F")

    def get(self, shard_key: str) -> bytes:
        while True:
            with self.lock:
                if shard_key in self.sizes:
                    self.sizes.move_to_end(shard_key)
                    return self._path(shard_key).read_bytes()
                event = self.arriving.get(shard_key)
                if event is None:
                    self.arriving[shard_key] = threading.Event()
                    break
            event.wait(60)   # another thread fetches it: look again once it is done (or failed)
        try:
            data = _call("GET", self.endpoint, self.bucket, shard_key,
                         lambda: bytes(obstore.get(self.store, shard_key).bytes()))
            if len(data) > self.budget:
                raise ValueError(f"shard {shard_key!r} ({len(data)} bytes) exceeds the budget of {self.budget} bytes")
            with self.lock:
                while self.sizes and sum(self.sizes.values()) + len(data) > self.budget:
                    oldest, _ = self.sizes.popitem(last=False)
                    self._path(oldest).unlink()
                self._path(shard_key).write_bytes(data)
                self.sizes[shard_key] = len(data)
            return data
        finally:
            with self.lock:
                self.arriving.pop(shard_key).set()
