"""Exercise 15, the answer: exactly once over a flaky network, on every rank.

The module follows the exercise's steps, and each piece is a public function, class or method whose docstring says
what it does (a planted defect replaces one and keeps the rest).

Design (see each piece's docstring):
- Step 1, `read_object`, is one loop of attempts (`read_with_retries`) around one boto3 client per endpoint whose
  own retries are off (its attempts would multiply ours, and it never retries a body cut short). A body is read in
  chunks into one buffer (`Transfer`), so after a drop the loop knows how many bytes arrived and asks for the rest,
  `Range: bytes=<next>-<last>`, checking the answer is 206 with exactly that Content-Range (and the same ETag:
  If-Match). 503/5xx and failed connections are retried after a full-jitter wait, uniform in
  [0, min(max_delay_s, base_delay_s x 2^(n-1))]; any other answer (403, 404, 416) never gets better and raises at
  once. Every failure is a `StoreError` naming the bucket, the key (and range), the endpoint's URL and the last
  failure: what step 5 asks of the store's errors.
- Step 2, `read_objects`, keeps order with a window of futures on max_in_flight threads (as exercise 14's fetcher),
  and limits the requests actually open with AIMD (`AimdWindow`): the limit halves on a SlowDown (once per round
  trip: only a request sent after the last cut may cut again) and grows by one per limit's worth of successes, up
  to max_in_flight. Retry waits are spent outside the window.
- Steps 3 and 4, `RemoteEpochs`: the plan of one rank's epoch, its reading, and its position (the comment above the
  class).
- Step 5, `check_state`: what `load_state_dict` refuses, before changing anything.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from loaderlab.storage.server import Endpoint

# ---- step 1: exactly once under faults (read_object) ------------------------------------------------------------

CONNECT_TIMEOUT_S = 2.0     # loopback: a refused connection fails at once; one not accepted this long fails the attempt
POOL_CONNECTIONS = 64       # one client serves every thread of a process (read_objects, RemoteEpochs' readers)
CHUNK_BYTES = 64 * 1024     # a body is read this much at a time: after a drop, what arrived is kept
RETRIED_STATUSES = frozenset({500, 502, 503, 504})   # SlowDown, InternalError, ...: worth another attempt


@dataclass(frozen=True)
class RetryPolicy:
    """How one request is retried (the grader varies every field)."""

    max_attempts: int = 6        # attempts per call, the first included
    base_delay_s: float = 0.05   # the wait before retry n is at most min(max_delay_s, base_delay_s * 2 ** (n - 1))
    max_delay_s: float = 1.0
    read_timeout_s: float = 10.0   # a body (or an answer) that sends nothing this long is abandoned, as a cut one


class StoreError(RuntimeError):
    """A read from the store failed: the message names the bucket, the key, the endpoint and why."""


class RetryableFailure(Exception):
    """One attempt failed in a way another attempt may not (its message says how)."""

    def __init__(self, why: str, slowdown: bool = False) -> None:
        super().__init__(why)
        self.slowdown = slowdown


@functools.lru_cache(maxsize=8)
def client(endpoint: Endpoint, read_timeout_s: float) -> Any:
    """One boto3 client per endpoint and read timeout (thread-safe), its own retries off: every attempt is
    read_object's. botocore's read_timeout bounds each wait for bytes of an answer (60 s by default): a stalled body
    raises ReadTimeoutError out of its read, and read_object resumes it as a cut one."""
    return endpoint.client(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=CONNECT_TIMEOUT_S,
                           read_timeout=read_timeout_s, max_pool_connections=POOL_CONNECTIONS)


def backoff_s(retry: RetryPolicy, n: int) -> float:
    """The wait before retry n (1, 2, ...): full jitter, uniform in [0, min(max_delay_s, base_delay_s x 2^(n-1))]."""
    return random.uniform(0.0, min(retry.max_delay_s, retry.base_delay_s * 2 ** (n - 1)))


def read_object(endpoint: Endpoint, bucket: str, key: str, retry: RetryPolicy = RetryPolicy(),
                byte_range: tuple[int, int] | None = None) -> bytes:
    """The object's bytes (or bytes byte_range[0]..byte_range[1], both included), whatever the network does."""
    return read_with_retries(endpoint, bucket, key, retry, byte_range)


def read_with_retries(endpoint: Endpoint, bucket: str, key: str, retry: RetryPolicy,
                      byte_range: tuple[int, int] | None, gate: Gate | None = None) -> bytes:
    """read_object: at most max_attempts attempts of one Transfer, a backoff_s wait before each retry, each attempt
    inside `gate` when given (read_objects' window); a failure past them, or one never worth retrying, raises
    StoreError naming the request and the endpoint."""
    if retry.max_attempts < 1:
        raise ValueError(f"RetryPolicy.max_attempts must be at least 1, got {retry.max_attempts}")
    if byte_range is not None and not 0 <= byte_range[0] <= byte_range[1]:
        raise ValueError(f"byte_range {byte_range} of s3://{bucket}/{key}: want (first, last), 0 <= first <= last")
    transfer = Transfer(client(endpoint, retry.read_timeout_s), bucket, key, byte_range)
    where = f"GET s3://{bucket}/{key}{'' if byte_range is None else ' bytes %d-%d' % byte_range} at {endpoint.url}"
    last_failure = ""
    for attempt in range(1, retry.max_attempts + 1):
        if attempt > 1:
            time.sleep(backoff_s(retry, attempt - 1))
        ticket = gate.acquire() if gate is not None else 0
        slowdown = False
        try:
            transfer.attempt()
            return bytes(transfer.data)
        except RetryableFailure as failure:
            slowdown, last_failure = failure.slowdown, str(failure)
        except StoreError as err:
            raise StoreError(f"{where}: {err} (not retried: another attempt gets the same answer)") from err.__cause__
        finally:
            if gate is not None:
                gate.release(ticket, slowdown)
    raise StoreError(f"{where}: gave up after {retry.max_attempts} attempts ({len(transfer.data):,} bytes received); "
                     f"the last failure: {last_failure}")


class Transfer:
    """One object's (or range's) bytes, gathered over attempts: each attempt asks for what has not arrived yet."""

    def __init__(self, client: Any, bucket: str, key: str, byte_range: tuple[int, int] | None) -> None:
        self.client, self.bucket, self.key = client, bucket, key
        self.first, self.last = byte_range if byte_range is not None else (0, None)   # last: unknown until answered
        self.data = bytearray()
        self.etag: str | None = None

    def attempt(self) -> None:
        """One GET for the bytes still missing; raises RetryableFailure or StoreError (never worth retrying)."""
        start = self.first + len(self.data)
        ranged = self.last is not None
        if ranged and start > self.last:   # everything arrived before the read that raised
            return
        request = {"Bucket": self.bucket, "Key": self.key}
        if ranged:
            request["Range"] = f"bytes={start}-{self.last}"
        if self.etag is not None:
            request["IfMatch"] = self.etag   # the rest of the same version, or 412
        try:
            answer = self.client.get_object(**request)
        except ClientError as err:
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            code = err.response.get("Error", {}).get("Code", "?")
            if status in RETRIED_STATUSES:
                raise RetryableFailure(f"{status} {code}", slowdown=code == "SlowDown" or status == 503) from err
            raise StoreError(f"{status} {code}: {err}") from err
        except BotoCoreError as err:   # refused, reset, timed out: the connection failed
            raise RetryableFailure(f"{type(err).__name__}: {err}") from err
        body = answer["Body"]
        try:
            self.check_answer(answer, start, ranged)
            while chunk := self.read_chunk(body):
                self.data += chunk
        finally:
            body.close()

    def check_answer(self, answer: Any, start: int, ranged: bool) -> None:
        """Refuse (StoreError) an answer to a Range request that is not 206 with exactly the bytes asked for; learn
        the object's last byte from a whole answer, and its ETag from the first."""
        status = answer["ResponseMetadata"]["HTTPStatusCode"]
        if ranged:
            expected = f"bytes {start}-{self.last}/"
            if status != 206 or not str(answer.get("ContentRange", "")).startswith(expected):
                raise StoreError(f"asked for bytes {start}-{self.last}, answered {status} with Content-Range "
                                 f"{answer.get('ContentRange')!r}: not those bytes (a range past the object's end, "
                                 "or a server that ignores Range)")
        else:
            self.last = answer["ContentLength"] - 1
        self.etag = self.etag or answer.get("ETag")

    def read_chunk(self, body: Any) -> bytes:
        """The body's next CHUNK_BYTES (b"" at its end); a body that stops short raises RetryableFailure."""
        try:
            return body.read(CHUNK_BYTES)
        except BotoCoreError as err:   # the body stopped short: ResponseStreamingError, IncompleteReadError, timeout
            raise RetryableFailure(f"the body stopped after {len(self.data):,} of {self.last - self.first + 1:,} "
                                   f"bytes ({type(err).__name__}: {err})") from err


# ---- step 2: 503 is back-pressure (read_objects) ----------------------------------------------------------------

WINDOW_WAIT_S = 1.0         # a thread waiting for a free slot in read_objects' window looks again this often


class Gate(Protocol):
    """What read_objects puts around each attempt: a slot before it, its outcome after."""

    def acquire(self) -> int: ...

    def release(self, ticket: int, slowdown: bool) -> None: ...


class AimdWindow:
    """AIMD on the requests open: the limit halves on a SlowDown and grows by one per limit's worth of successes."""

    def __init__(self, most: int) -> None:
        self.most, self.limit, self.open = most, float(most), 0
        self.cuts = 0   # how many times the limit was cut: a ticket; only a request sent after the last cut cuts
        self.changed = threading.Condition()

    def acquire(self) -> int:
        """Wait for a free slot under the limit and take it; returns the ticket release needs."""
        with self.changed:
            while self.open >= int(self.limit):
                self.changed.wait(WINDOW_WAIT_S)
            self.open += 1
            return self.cuts

    def release(self, ticket: int, slowdown: bool) -> None:
        """Give the slot back with its attempt's outcome: a SlowDown halves the limit (once per cut), a success
        grows it."""
        with self.changed:
            self.open -= 1
            if slowdown and ticket == self.cuts:
                self.limit, self.cuts = max(1.0, self.limit / 2), self.cuts + 1
            elif not slowdown:
                self.limit = min(float(self.most), self.limit + 1 / self.limit)
            self.changed.notify_all()


def read_objects(endpoint: Endpoint, bucket: str, keys: Sequence[str], max_in_flight: int,
                 retry: RetryPolicy = RetryPolicy()) -> Iterator[bytes]:
    """Each object's bytes in the order of `keys`, with up to `max_in_flight` requests open, slowing down when asked."""
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    window = AimdWindow(max_in_flight)
    pool = ThreadPoolExecutor(max_in_flight, thread_name_prefix="ex15-read")
    pending: deque[Future[bytes]] = deque()
    todo = iter(keys)
    try:
        for key in todo:
            pending.append(pool.submit(read_with_retries, endpoint, bucket, key, retry, None, window))
            if len(pending) == max_in_flight:
                break
        while pending:
            data = pending.popleft().result()
            for key in todo:   # refill before handing on: the window stays full while the consumer works
                pending.append(pool.submit(read_with_retries, endpoint, bucket, key, retry, None, window))
                break
            yield data
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---- step 3: equal batches per rank (RemoteEpochs; its state, step 4, at the end of the class) ------------------
# One rank's epoch, planned from (seed, epoch) alone, read as ranged pieces of shards by num_workers threads:
# - the epoch's sequence: the index's shards in an order drawn from Random("seed:epoch"), each shard's samples in
#   written order (a rank then reads runs of neighbours: few requests, no bytes between samples but tar headers);
# - the sequence padded to a multiple of world_size by repeating its first samples (the fewest repeats, at most
#   world_size - 1; Mosaic's choice, MosaicML streaming PR #706): every rank gets ceil(N / world_size) samples, and
#   rank r the r-th contiguous block, so a rank whose block lies inside one shard reads only that piece of it;
# - the block cut into pieces (runs of neighbours in one shard), one Range GET each through read_object (its
#   retries resume a cut body), num_workers pieces in flight, handed on in the plan's order;
# - the state counts the samples the loop has received in the epoch (counted before each yield: a generator waits
#   at its yield while the loop works), with what makes a position meaningful: the index's fingerprint, the seed,
#   the epoch, world_size and rank. load_state_dict checks all of it (check_state) before assigning anything.

NEIGHBOUR_GAP_BYTES = 8192   # between two samples of a shard: tar headers and the .cls member (ci: 3,584-4,095 bytes)


class RemoteSample(NamedTuple):
    """One sample read from the store."""

    key: str     # the sample's key, as the index says ("circles/circles_000003")
    data: bytes  # the image file's bytes, as stored
    label: int


class Entry(NamedTuple):
    """One sample as the index places it: its key and label, and its image's bytes in a shard."""

    key: str
    label: int
    shard: str
    offset: int
    size: int


def index_entries(raw: bytes, where: str) -> list[Entry]:
    """The index's samples, in its order; an index that does not parse raises ValueError naming `where`."""
    try:
        return [Entry(str(row["key"]), int(row["label"]), str(row["shard"]), int(row["offset"]), int(row["size"]))
                for row in json.loads(raw)["samples"]]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"the index {where} does not parse: {err!r}") from err


def pieces_of(entries: Sequence[Entry]) -> list[list[Entry]]:
    """Consecutive entries grouped into runs of neighbours in one shard (each run: one Range request)."""
    pieces: list[list[Entry]] = []
    for entry in entries:
        last = pieces[-1][-1] if pieces else None
        if (last is not None and entry.shard == last.shard
                and 0 <= entry.offset - (last.offset + last.size) <= NEIGHBOUR_GAP_BYTES):
            pieces[-1].append(entry)
        else:
            pieces.append([entry])
    return pieces


class RemoteEpochs:
    """One rank's batches (lists of RemoteSample) of a split's samples, read from its shards through the index."""

    def __init__(self, endpoint: Endpoint, bucket: str, index_key: str, batch_size: int, *, world_size: int = 1,
                 rank: int = 0, num_workers: int = 1, seed: int = 0, retry: RetryPolicy = RetryPolicy()) -> None:
        for name, value in (("batch_size", batch_size), ("world_size", world_size), ("num_workers", num_workers)):
            if value < 1:
                raise ValueError(f"RemoteEpochs: {name} must be at least 1, got {value}")
        if not 0 <= rank < world_size:
            raise ValueError(f"RemoteEpochs: rank must be in [0, {world_size - 1}] for world_size={world_size}, "
                             f"got {rank}")
        self.endpoint, self.bucket, self.index_key, self.retry = endpoint, bucket, index_key, retry
        self.batch_size, self.world_size, self.rank = batch_size, world_size, rank
        self.num_workers, self.seed = num_workers, seed
        where = f"s3://{bucket}/{index_key} at {endpoint.url}"
        raw = read_object(endpoint, bucket, index_key, retry)
        self.fingerprint = hashlib.sha256(raw).hexdigest()
        self.shards: dict[str, list[Entry]] = {}   # in the index's order, each shard's samples in written order
        for entry in index_entries(raw, where):
            self.shards.setdefault(entry.shard, []).append(entry)
        for samples in self.shards.values():
            samples.sort(key=lambda entry: entry.offset)
        self.sample_count = sum(map(len, self.shards.values()))
        self.epoch = 0
        self.samples_received = 0   # in the epoch, of this rank's share, counted where the loop receives them
        self._resume_at = 0         # where the next iter() starts: a loaded position, then 0 again

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration follows (every rank calls it with the same value)."""
        if epoch != self.epoch:
            self.epoch, self.samples_received, self._resume_at = epoch, 0, 0

    def epoch_order(self) -> list[Entry]:
        """Every sample of the epoch once: the shards in an order drawn from (seed, epoch), each in written order."""
        shards = list(self.shards)
        random.Random(f"{self.seed}:{self.epoch}").shuffle(shards)
        return [entry for shard in shards for entry in self.shards[shard]]

    def share_size(self) -> int:
        """The samples of every rank's share: the epoch's, divided by world_size and rounded up."""
        return -(-self.sample_count // self.world_size)

    def share(self) -> list[Entry]:
        """This rank's block of the epoch's order, padded with its first samples to world_size equal blocks."""
        order = self.epoch_order()
        size = self.share_size()
        return [order[position % len(order)] for position in range(self.rank * size, (self.rank + 1) * size)]

    def __len__(self) -> int:
        return -(-self.share_size() // self.batch_size)

    def __iter__(self) -> Iterator[list[RemoteSample]]:
        start, self._resume_at = self._resume_at, 0
        self.samples_received = start
        return self.counted_batches(self.read_samples(self.share()[start:]))

    def read_samples(self, entries: list[Entry]) -> Generator[RemoteSample, None, None]:
        """The samples of `entries` in order, one Range GET per piece, num_workers pieces in flight."""
        pieces = iter(pieces_of(entries))
        pool = ThreadPoolExecutor(self.num_workers, thread_name_prefix="ex15-reader")
        window: deque[Future[list[RemoteSample]]] = deque()
        try:
            for piece in pieces:
                window.append(pool.submit(self.read_piece, piece))
                if len(window) == self.num_workers:
                    break
            while window:
                samples = window.popleft().result()
                for piece in pieces:   # refill before handing on: the readers work while the loop does
                    window.append(pool.submit(self.read_piece, piece))
                    break
                yield from samples
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def read_piece(self, piece: list[Entry]) -> list[RemoteSample]:
        """The samples of one piece (neighbours in one shard), read in one Range GET through read_object."""
        first, last = piece[0], piece[-1]
        end = last.offset + last.size - 1
        data = read_object(self.endpoint, self.bucket, first.shard, self.retry, (first.offset, end))
        if len(data) != end - first.offset + 1:
            raise RuntimeError(f"s3://{self.bucket}/{first.shard} at {self.endpoint.url} bytes {first.offset}-{end}: "
                               f"{len(data)} bytes came, not {end - first.offset + 1}")
        return [RemoteSample(entry.key, data[entry.offset - first.offset:entry.offset - first.offset + entry.size],
                             entry.label) for entry in piece]

    # ---- step 4: resume, twice ----------------------------------------------------------------------------------

    def counted_batches(self, samples: Generator[RemoteSample, None, None]) -> Iterator[list[RemoteSample]]:
        """Batches of batch_size (the last may be short), each counted as received before it is handed on."""
        batch: list[RemoteSample] = []
        try:
            for sample in samples:
                batch.append(sample)
                if len(batch) == self.batch_size:
                    self.samples_received += len(batch)   # before the yield: the loop holds the batch from here on
                    yield batch
                    batch = []
            if batch:
                self.samples_received += len(batch)
                yield batch
        finally:
            samples.close()   # stops the readers when the loop leaves early

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is in the epoch: what a checkpoint saves."""
        return {"index": self.fingerprint, "seed": self.seed, "epoch": self.epoch, "world_size": self.world_size,
                "rank": self.rank, "samples_received": self.samples_received}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume where `state` was saved: the next iteration yields the rest of its epoch."""
        check_state(state, self)
        self.samples_received = self._resume_at = state["samples_received"]


# ---- step 5: bad input -------------------------------------------------------------------------------------------
# The store's part is step 1's: StoreError names the request and the endpoint, RETRIED_STATUSES leaves 403 and 404
# to raise at once, CONNECT_TIMEOUT_S ends the wait on a server that does not answer. What is left is the state's.

STATE_TYPES = {"index": str, "seed": int, "epoch": int, "world_size": int, "rank": int, "samples_received": int}


def check_state(state: Any, epochs: RemoteEpochs) -> None:
    """Raise ValueError, naming what is wrong, unless `state` is a position `epochs` can resume: a dict of
    STATE_TYPES saved for its index, the epoch set_epoch chose, its seed, world_size and rank, within its share.
    It changes nothing."""
    if not isinstance(state, dict):
        raise ValueError(f"a RemoteEpochs state is a dict, got {type(state).__name__}")
    for key, kind in STATE_TYPES.items():
        if key not in state:
            raise ValueError(f"the state has no {key!r} (it holds {sorted(state)})")
        if type(state[key]) is not kind:
            raise ValueError(f"the state's {key!r} is {state[key]!r}, a {type(state[key]).__name__}, "
                             f"not {kind.__name__}")
    if state["index"] != epochs.fingerprint:
        raise ValueError(f"the state was saved for another index (fingerprint {state['index'][:12]}...) than "
                         f"s3://{epochs.bucket}/{epochs.index_key} (fingerprint {epochs.fingerprint[:12]}...): "
                         "another dataset")
    if state["epoch"] != epochs.epoch:
        raise ValueError(f"the state was saved in epoch {state['epoch']}, and set_epoch chose epoch {epochs.epoch}: "
                         f"call set_epoch({state['epoch']}) before load_state_dict")
    for key in ("seed", "world_size", "rank"):
        if state[key] != getattr(epochs, key):
            raise ValueError(f"the state was saved with {key}={state[key]}; this loader has {key}="
                             f"{getattr(epochs, key)}")
    if not 0 <= state["samples_received"] <= epochs.share_size():
        raise ValueError(f"the state's samples_received is {state['samples_received']}, outside 0.."
                         f"{epochs.share_size()} (this rank's share of the epoch)")
