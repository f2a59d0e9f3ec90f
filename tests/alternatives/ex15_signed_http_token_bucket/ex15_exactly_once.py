"""Exercise 15, a correct alternative for read_object and read_objects: signed HTTP and a token bucket.

- No SDK client: each attempt is one urllib3 request (its own retries off) signed with botocore's SigV4 signer, so
  nothing retries behind the loop's back. The body is streamed (`Response.stream`) into one buffer; urllib3 raises
  ProtocolError when a body ends before its Content-Length, and the next attempt asks for the rest with Range (and
  If-Match: the same version), taking the answer only if it is 206 with that Content-Range. Each request's read
  timeout is the policy's read_timeout_s (urllib3 raises ReadTimeoutError out of a stalled body's read: resumed too).
- The wait before retry n is `random.random() * cap` (full jitter written another way).
- read_objects: max_in_flight worker threads take (position, key) from a queue and leave results in a dict; the
  consumer waits for the next position (a Condition). SlowDown is back-pressure through a client-side token bucket
  (as botocore's "adaptive" mode, with other constants): unlimited until the first SlowDown, then half the send
  rate measured over the last second (at most one cut per RATE_CUT_GAP_S), growing threefold per second without
  SlowDowns; a request waiting for its turn looks again as the rate grows.
- RemoteEpochs (and RetryPolicy, RemoteSample) are the solution's.
"""

from __future__ import annotations

import queue
import random
import re
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

import urllib3
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from loaderlab.storage.server import Endpoint
from solutions.ex15_exactly_once import *  # noqa: F403  (RemoteEpochs, RemoteSample: the solution's)
from solutions.ex15_exactly_once import RetryPolicy

CHUNK_BYTES = 32 * 1024
HTTP = urllib3.PoolManager(maxsize=64, retries=False, timeout=urllib3.Timeout(connect=2.0))
RETRIED = frozenset({500, 502, 503, 504})
RATE_CUT = 0.5            # a SlowDown sets the rate to this share of the send rate measured ...
MEASURE_S = 1.0           # ... over this long
RATE_FLOOR_PER_S = 1.0
RATE_GROWTH_PER_S = 3.0   # without SlowDowns the rate grows this much per second ...
UNLIMITED_PER_S = 1000.0  # ... until it is lifted altogether past this
RATE_CUT_GAP_S = 0.5      # SlowDowns closer together than this cut the rate once
WAIT_STEP_S = 0.5         # the longest single sleep or wait: a blocked thread looks at `stop` this often


class ObjectReadError(RuntimeError):
    """Names the bucket, the key, the endpoint and the last failure."""


class _Again(Exception):
    def __init__(self, why: str, slowdown: bool = False) -> None:
        super().__init__(why)
        self.slowdown = slowdown


def _signed(endpoint: Endpoint, url: str, headers: dict[str, str]) -> dict[str, str]:
    request = AWSRequest(method="GET", url=url, headers=headers)
    S3SigV4Auth(Credentials(endpoint.access_key, endpoint.secret_key), "s3", endpoint.region).add_auth(request)
    return dict(request.headers.items())


def _error_code(body: bytes) -> str:
    found = re.search(rb"<Code>([^<]+)</Code>", body)
    return found.group(1).decode() if found else "?"


class _Progress:
    """What one call has: its bytes so far, the last byte's position (once known), the object's ETag."""

    def __init__(self, first: int, last: int | None) -> None:
        self.first, self.last, self.data, self.etag = first, last, bytearray(), ""


def _attempt(endpoint: Endpoint, url: str, progress: _Progress, read_timeout_s: float) -> None:
    """One GET of what is missing into progress.data; raises _Again or ObjectReadError."""
    first, last, data = progress.first, progress.last, progress.data
    start = first + len(data)
    headers = {} if last is None else {"Range": f"bytes={start}-{last}"}
    if progress.etag:
        headers["If-Match"] = progress.etag
    try:
        answer = HTTP.request("GET", url, headers=_signed(endpoint, url, headers), preload_content=False,
                              timeout=urllib3.Timeout(connect=2.0, read=read_timeout_s))
    except urllib3.exceptions.HTTPError as err:
        raise _Again(f"connection failed: {err}") from err
    try:
        if answer.status in RETRIED:
            code = _error_code(answer.read())
            raise _Again(f"{answer.status} {code}", slowdown=answer.status == 503)
        if answer.status >= 300:
            raise ObjectReadError(f"{answer.status} {_error_code(answer.read())}")
        if last is None:
            if answer.status != 200:
                raise ObjectReadError(f"answered {answer.status} to a GET without Range")
            last = progress.last = int(answer.headers["Content-Length"]) - 1
        elif answer.status != 206 or not answer.headers.get("Content-Range", "").startswith(f"bytes {start}-{last}/"):
            raise ObjectReadError(f"asked bytes {start}-{last}, answered {answer.status} with Content-Range "
                                  f"{answer.headers.get('Content-Range')!r}")
        progress.etag = answer.headers.get("ETag", "")
        try:
            # decode_content=False: urllib3 then hands on each read as it comes; decoding, it gathers reads into a
            # buffer of CHUNK_BYTES first, and a cut throws away what that buffer held
            for chunk in answer.stream(CHUNK_BYTES, decode_content=False):
                data += chunk
        except urllib3.exceptions.HTTPError as err:
            raise _Again(f"body cut after {len(data):,} of {last - first + 1:,} bytes: {err}") from err
    finally:
        answer.release_conn()


def _fetch(endpoint: Endpoint, bucket: str, key: str, retry: RetryPolicy, byte_range: tuple[int, int] | None,
           bucket_gate: _TokenBucket | None = None) -> bytes:
    if retry.max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {retry.max_attempts}")
    if byte_range is not None and not 0 <= byte_range[0] <= byte_range[1]:
        raise ValueError(f"byte_range {byte_range}: want 0 <= first <= last")
    url = f"{endpoint.url}/{quote(bucket)}/{quote(key)}"
    progress = _Progress(*(byte_range if byte_range is not None else (0, None)))
    why = ""
    where = f"s3://{bucket}/{key}{'' if byte_range is None else ' bytes %d-%d' % byte_range} at {endpoint.url}"
    for attempt in range(retry.max_attempts):
        if attempt:
            time.sleep(random.random() * min(retry.max_delay_s, retry.base_delay_s * 2 ** (attempt - 1)))
        if bucket_gate is not None:
            bucket_gate.take()
        try:
            _attempt(endpoint, url, progress, retry.read_timeout_s)
        except _Again as failure:
            why = str(failure)
            if bucket_gate is not None and failure.slowdown:
                bucket_gate.slowed_down()
            continue
        except ObjectReadError as err:
            raise ObjectReadError(f"GET {where}: {err}") from None
        return bytes(progress.data)
    raise ObjectReadError(f"GET {where}: {retry.max_attempts} attempts failed, the last: {why}")


def read_object(endpoint: Endpoint, bucket: str, key: str, retry: RetryPolicy = RetryPolicy(),
                byte_range: tuple[int, int] | None = None) -> bytes:
    """The object's bytes (or bytes byte_range[0]..byte_range[1], both included), whatever the network does."""
    return _fetch(endpoint, bucket, key, retry, byte_range)


class _TokenBucket:
    """A client-side request rate: unlimited until a SlowDown, then cut, and grown back while none comes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rate: float | None = None
        self.last_sent = self.grown_at = 0.0
        self.sent: deque[float] = deque()   # send times over the last MEASURE_S
        self.cut_at = -RATE_CUT_GAP_S

    def take(self) -> None:
        """Return when this request may be sent (the rate may grow while it waits)."""
        while True:
            with self.lock:
                now = time.monotonic()
                if self.rate is not None:
                    self.rate *= RATE_GROWTH_PER_S ** (now - self.grown_at)
                    self.rate = None if self.rate > UNLIMITED_PER_S else self.rate
                self.grown_at = now
                due = self.last_sent + (0.0 if self.rate is None else 1.0 / self.rate)
                if now >= due:
                    self.last_sent = now
                    self.sent.append(now)
                    while self.sent[0] < now - MEASURE_S:
                        self.sent.popleft()
                    return
            time.sleep(min(due - now, WAIT_STEP_S))

    def slowed_down(self) -> None:
        with self.lock:
            now = time.monotonic()
            if now - self.cut_at >= RATE_CUT_GAP_S:
                measured = sum(at >= now - MEASURE_S for at in self.sent) / MEASURE_S
                self.rate = max(RATE_FLOOR_PER_S, RATE_CUT * measured)
                self.cut_at = self.grown_at = now


def read_objects(endpoint: Endpoint, bucket: str, keys: Sequence[str], max_in_flight: int,
                 retry: RetryPolicy = RetryPolicy()) -> Iterator[bytes]:
    """Each object's bytes in the order of `keys`, with up to `max_in_flight` requests open, slowing down when asked."""
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    gate = _TokenBucket()
    todo: queue.Queue[tuple[int, str] | None] = queue.Queue()
    for item in enumerate(keys):
        todo.put(item)
    done: dict[int, tuple[bool, Any]] = {}
    ready = threading.Condition()
    stop = threading.Event()
    ahead = threading.Semaphore(2 * max_in_flight)   # results held, not yet handed on

    def work() -> None:
        while not stop.is_set():
            if not ahead.acquire(timeout=WAIT_STEP_S):
                continue
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            position, key = item
            try:
                outcome = (True, _fetch(endpoint, bucket, key, retry, None, gate))
            except Exception as err:
                outcome = (False, err)
            with ready:
                done[position] = outcome
                ready.notify_all()

    workers = [threading.Thread(target=work, name=f"ex15-alt-{i}", daemon=True)
               for i in range(min(max_in_flight, len(keys)))]
    for worker in workers:
        worker.start()
    try:
        for position in range(len(keys)):
            with ready:
                while position not in done:
                    ready.wait(WAIT_STEP_S)
                ok, value = done.pop(position)
            ahead.release()
            if not ok:
                raise value
            yield value
    finally:
        stop.set()
        for worker in workers:
            worker.join()
