"""Exercise 14, a correct alternative: boto3 and threads, each piece built another way than the solution's.

- fetch_in_flight: `in_flight` worker threads of its own pull (position, key) from a queue and put results in a
  reorder buffer (a dict under a Condition); the consumer takes position after position. A semaphore of twice
  in_flight slots bounds how far the workers run ahead of the consumer. On close or error a stop flag is set, the
  workers are woken and joined.
- ShardIndex.read merges samples that are one after the other in the index (the same shard), not by byte gap.
- ShardCache keeps a running byte count and an Event per shard being fetched.
object_samples and shard_samples are the solution's.
"""

from __future__ import annotations

import json
import queue
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from loaderlab.storage.server import Endpoint
from solutions.ex14_remote_shards import (RemoteReadError, RemoteSample, fetch_object, object_samples,  # noqa: F401
                                         open_object, shard_samples, store_client)

WAIT_S = 0.1   # how often a waiting thread looks at the stop flag


def fetch_in_flight(endpoint: Endpoint, bucket: str, keys: Sequence[str], in_flight: int) -> Iterator[bytes]:
    if in_flight < 1:
        raise ValueError(f"in_flight must be at least 1, got {in_flight}")
    keys = list(keys)
    client = store_client(endpoint, pool=in_flight)
    work: queue.Queue[tuple[int, str]] = queue.Queue()
    for item in enumerate(keys):
        work.put(item)
    ahead = threading.Semaphore(2 * in_flight)
    done = threading.Condition()
    results: dict[int, tuple[bool, Any]] = {}
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            if not ahead.acquire(timeout=WAIT_S):
                continue
            try:
                position, key = work.get_nowait()
            except queue.Empty:
                ahead.release()
                return
            try:
                outcome = (True, fetch_object(client, endpoint, bucket, key))
            except Exception as err:
                outcome = (False, err)
            with done:
                results[position] = outcome
                done.notify_all()

    workers = [threading.Thread(target=worker, name=f"ex14-worker-{i}") for i in range(in_flight)]
    for thread in workers:
        thread.start()
    try:
        for position in range(len(keys)):
            with done:
                while position not in results:
                    done.wait(WAIT_S)
                ok, value = results.pop(position)
            ahead.release()
            if not ok:
                raise value
            yield value
    finally:
        stop.set()
        for thread in workers:
            thread.join()


class ShardIndex:
    def __init__(self, endpoint: Endpoint, bucket: str, index_key: str) -> None:
        self.endpoint, self.bucket = endpoint, bucket
        self.client = store_client(endpoint)
        rows = json.loads(fetch_object(self.client, endpoint, bucket, index_key))["samples"]
        self.place = {row["key"]: place for place, row in enumerate(rows)}
        self.rows = rows

    def read(self, keys: Sequence[str]) -> list[RemoteSample]:
        places = sorted({self.place[key] for key in keys})
        runs: list[list[int]] = []
        for place in places:
            if runs and place == runs[-1][-1] + 1 and self.rows[place]["shard"] == self.rows[runs[-1][-1]]["shard"]:
                runs[-1].append(place)
            else:
                runs.append([place])
        data = {}
        for run in runs:
            first, last = self.rows[run[0]], self.rows[run[-1]]
            start, end = first["offset"], last["offset"] + last["size"]
            response = open_object(self.client, self.endpoint, self.bucket, first["shard"], (start, end))
            status = response["ResponseMetadata"]["HTTPStatusCode"]
            if status != 206:
                raise RemoteReadError(f"shard s3://{self.bucket}/{first['shard']} at {self.endpoint.url} answered "
                                      f"{status} to a Range request, not 206")
            chunk = response["Body"].read()
            if len(chunk) != end - start:
                raise RemoteReadError(f"shard s3://{self.bucket}/{first['shard']} at {self.endpoint.url}: "
                                      f"{len(chunk)} bytes came of {end - start} for samples "
                                      f"{[self.rows[p]['key'] for p in run]}, past the shard's end")
            for place in run:
                row = self.rows[place]
                data[row["key"]] = chunk[row["offset"] - start:row["offset"] - start + row["size"]]
        return [RemoteSample(key, data[key], self.rows[self.place[key]]["label"]) for key in keys]


class ShardCache:
    def __init__(self, endpoint: Endpoint, bucket: str, cache_dir: Path | str, budget_bytes: int) -> None:
        self.endpoint, self.bucket, self.budget = endpoint, bucket, budget_bytes
        self.folder = Path(cache_dir)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.client = store_client(endpoint)
        self.lock = threading.Lock()
        self.held: OrderedDict[str, int] = OrderedDict()
        self.used = 0
        self.fetching: dict[str, threading.Event] = {}

    def _path(self, key: str) -> Path:
        return self.folder / key.replace("/", "-")

    def get(self, shard_key: str) -> bytes:
        while True:
            with self.lock:
                if shard_key in self.held:
                    self.held.move_to_end(shard_key)
                    return self._path(shard_key).read_bytes()
                arriving = self.fetching.get(shard_key)
                if arriving is None:
                    self.fetching[shard_key] = threading.Event()
                    break
            arriving.wait(60)
        try:
            data = fetch_object(self.client, self.endpoint, self.bucket, shard_key)
            with self.lock:
                while self.held and self.used + len(data) > self.budget:
                    oldest, size = self.held.popitem(last=False)
                    self._path(oldest).unlink()
                    self.used -= size
                if self.used + len(data) > self.budget:
                    raise ValueError(f"shard {shard_key!r} ({len(data)} bytes) is larger than the budget ({self.budget})")
                self._path(shard_key).write_bytes(data)
                self.held[shard_key] = len(data)
                self.used += len(data)
            return data
        finally:
            with self.lock:
                self.fetching.pop(shard_key).set()
