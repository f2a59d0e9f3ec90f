"""Exercise 15, a correct alternative for RemoteEpochs, each piece built another way than the solution's.

- The plan: the shards in an order from numpy's generator seeded with [seed, epoch], each in written order; the
  sequence padded with its first samples to a multiple of world_size, and rank r takes every world_size-th sample
  from position r (strided, not contiguous blocks).
- The reads: runs of samples that follow each other in the index (the same shard) are one Range request each;
  `num_workers` threads of its own take runs by position (run i to worker i % num_workers) and put the samples in a
  reorder buffer under a Condition; the consumer takes them in the plan's order. A semaphore bounds how far the
  workers run ahead; on close or error a stop flag is set and the workers are joined.
- The state: the index's sha1, the epoch, the seed, [rank, world_size], and the position in samples.
read_object, read_objects, RetryPolicy and RemoteSample are the solution's.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from loaderlab.storage.server import Endpoint
from solutions.ex15_exactly_once import RemoteSample, RetryPolicy, read_object, read_objects  # noqa: F401

WAIT_S = 0.1           # how often a waiting thread looks at the stop flag
AHEAD_PER_WORKER = 2   # runs a worker may have read beyond what the consumer took


class Sample(NamedTuple):
    position: int   # in the index
    key: str
    label: int
    shard: str
    offset: int
    size: int


class RemoteEpochs:
    def __init__(self, endpoint: Endpoint, bucket: str, index_key: str, batch_size: int, *, world_size: int = 1,
                 rank: int = 0, num_workers: int = 1, seed: int = 0, retry: RetryPolicy = RetryPolicy()) -> None:
        if min(batch_size, world_size, num_workers) < 1 or not 0 <= rank < world_size:
            raise ValueError(f"RemoteEpochs: batch_size {batch_size}, world_size {world_size} and num_workers "
                             f"{num_workers} must be at least 1, and rank {rank} in [0, {world_size})")
        self.endpoint, self.bucket, self.retry = endpoint, bucket, retry
        self.batch_size, self.world_size, self.rank, self.num_workers, self.seed = (
            batch_size, world_size, rank, num_workers, seed)
        raw = read_object(endpoint, bucket, index_key, retry)
        self.digest = hashlib.sha1(raw).hexdigest()
        rows = json.loads(raw)["samples"]
        self.samples = [Sample(i, row["key"], row["label"], row["shard"], row["offset"], row["size"])
                        for i, row in enumerate(rows)]
        self.epoch, self.position, self.start_at = 0, 0, 0

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.position, self.start_at = epoch, 0, 0

    def _mine(self) -> list[Sample]:
        shards = list(dict.fromkeys(sample.shard for sample in self.samples))
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(shards))
        sequence = [sample for i in order for sample in self.samples if sample.shard == shards[i]]
        total = -(-len(sequence) // self.world_size) * self.world_size
        padded = [sequence[i % len(sequence)] for i in range(total)] if sequence else []
        return padded[self.rank::self.world_size]

    def __len__(self) -> int:
        return -(-(-(-len(self.samples) // self.world_size)) // self.batch_size)

    def __iter__(self) -> Iterator[list[RemoteSample]]:
        start, self.start_at = self.start_at, 0
        self.position = start
        return self._batches(self._mine()[start:])

    def _batches(self, rest: list[Sample]) -> Iterator[list[RemoteSample]]:
        runs: list[list[Sample]] = []
        for sample in rest:
            if runs and runs[-1][-1].shard == sample.shard and runs[-1][-1].position + 1 == sample.position:
                runs[-1].append(sample)
            else:
                runs.append([sample])
        buffer: dict[int, list[RemoteSample] | BaseException] = {}
        ready = threading.Condition()
        ahead = threading.Semaphore(AHEAD_PER_WORKER * self.num_workers)
        stop = threading.Event()

        def work(worker: int) -> None:
            for number in range(worker, len(runs), self.num_workers):
                while not ahead.acquire(timeout=WAIT_S):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                try:
                    result: list[RemoteSample] | BaseException = self._run(runs[number])
                except BaseException as err:
                    result = err
                with ready:
                    buffer[number] = result
                    ready.notify_all()

        workers = [threading.Thread(target=work, args=(w,), name=f"ex15-alt-{w}") for w in range(self.num_workers)]
        for worker in workers:
            worker.start()
        batch: list[RemoteSample] = []
        try:
            for number in range(len(runs)):
                with ready:
                    while number not in buffer:
                        ready.wait(WAIT_S)
                    result = buffer.pop(number)
                ahead.release()
                if isinstance(result, BaseException):
                    raise result
                for sample in result:
                    batch.append(sample)
                    if len(batch) == self.batch_size:
                        self.position += len(batch)
                        yield batch
                        batch = []
            if batch:
                self.position += len(batch)
                yield batch
        finally:
            stop.set()
            for worker in workers:
                worker.join()

    def _run(self, run: list[Sample]) -> list[RemoteSample]:
        start, end = run[0].offset, run[-1].offset + run[-1].size
        data = read_object(self.endpoint, self.bucket, run[0].shard, self.retry, (start, end - 1))
        if len(data) != end - start:
            raise RuntimeError(f"{run[0].shard} bytes {start}-{end - 1} at {self.endpoint.url}: {len(data)} came")
        return [RemoteSample(s.key, data[s.offset - start:s.offset - start + s.size], s.label) for s in run]

    def state_dict(self) -> dict[str, Any]:
        return {"fingerprint": self.digest, "epoch": self.epoch, "seed": self.seed,
                "ranks": [self.rank, self.world_size], "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        expected = {"fingerprint": str, "epoch": int, "seed": int, "ranks": list, "position": int}
        if not isinstance(state, dict) or set(state) != set(expected):
            raise ValueError(f"not a RemoteEpochs state: {str(state)[:200]}")
        wrong = [key for key, kind in expected.items() if type(state[key]) is not kind]
        if wrong:
            raise ValueError(f"the state's {wrong} have the wrong types")
        if state["fingerprint"] != self.digest:
            raise ValueError("the state belongs to another index (another dataset)")
        if state["epoch"] != self.epoch:
            raise ValueError(f"the state is of epoch {state['epoch']}, not of epoch {self.epoch} (set_epoch)")
        if state["seed"] != self.seed or state["ranks"] != [self.rank, self.world_size]:
            raise ValueError(f"the state's seed and ranks {state['seed']}, {state['ranks']} are not this loader's "
                             f"{self.seed}, {[self.rank, self.world_size]}")
        share = -(-len(self.samples) // self.world_size)
        if not 0 <= state["position"] <= share:
            raise ValueError(f"the state's position {state['position']} is outside 0..{share}")
        self.position = self.start_at = state["position"]
