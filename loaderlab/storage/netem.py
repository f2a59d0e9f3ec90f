"""The course's emulated network: a reverse proxy between an S3 client and the real server (module 10).

`tc netem` needs a kernel module these machines lack and toxiproxy is not installable, so the course puts its own
proxy (aiohttp, a process of its own: its own GIL) between the client and SeaweedFS:

    with emulated_network(endpoint.url, "region") as network:
        s3 = endpoint.through(network.url).client()
        ...
        network.stats().gets, network.use("flaky"), network.reset()

Every request is forwarded with its headers unchanged (Host included, so an AWS SigV4 signature made against the
proxy's address verifies upstream) and its bodies streamed both ways. Per request, from the current profile:

- a first-byte latency, `latency_s` +- `jitter_s` (uniform), counted from the request's arrival: the answer's
  headers leave no earlier than that (an upstream slower than it adds to it);
- the answer's body paced in chunks of 16-64 KiB by two token buckets: one per answer (`connection_bytes_per_s`:
  an HTTP/1.1 connection carries one answer at a time) and one shared by every answer (`total_bytes_per_s`);
  request bodies (PUT) are streamed, not paced;
- a per-prefix rate limit on GET and HEAD of objects (prefix: bucket + first key segment, "ci/images-3"): a
  1-second sliding window admits at most `prefix_gets_per_s` requests in any second, and answers the rest with
  S3's 503 SlowDown (XML body) without asking the server;
- an injected 503 SlowDown with probability `p_slowdown`, and a connection closed mid-body with probability
  `p_drop` (GETs answered 200 or 206 with a Content-Length of 2 bytes or more): the client gets the headers and
  a short body, 1 to Content-Length - 1 bytes of it, then end of stream. The transport is closed, not aborted:
  an abort throws away what is still buffered, so how many bytes arrive would depend on timing;
- a stalled body with probability `p_stall` (GETs answered 200 or 206 with a Content-Length of 2 bytes or more,
  not already cut): the client gets the headers and 1 to Content-Length - 1 bytes of the body, then nothing for
  `stall_s` seconds while the connection stays open, then end of stream. A client that gives up first (its read
  timeout) and closes the connection ends the stall there: the request is no longer counted in flight;
- `ignore_range`: a ranged GET is forwarded without its Range header, so the server answers 200 with the whole
  object (the negative fixture for a reader that must refuse what is not 206). When the client signed its Range
  header (boto3 does), removing it breaks the signature: the proxy then signs the request again, which needs the
  server's keys (pass an Endpoint rather than a URL to `emulated_network`), and answers 500 NetemCannotSign
  naming that without them.

Every fault decision, and the jitter, is a pure function of (seed, method, path, Range header, attempt), attempt =
how many times the same (method, path, Range) was seen before since the last reset (hashlib, no shared random
generator), so a run replays whatever the concurrency. Only the prefix limit depends on timing, as S3's does.
The path is the URL path with its query, less presigned URLs' X-Amz-* parameters (they change at each signing).

Counters (`Stats`) and the timeline (`Event`: every request, in arrival order, with when it came, what it asked,
how it ended and the bytes sent) are what the graders read. Control endpoints, never emulated nor counted, live
under `/__netem/` (S3 bucket names cannot contain "_"): GET stats, GET timeline, POST reset, GET and PUT profile.

`python -m loaderlab.storage.netem --upstream URL --profile NAME|JSON --port 0` listens on 127.0.0.1 only, prints
one JSON line, {"port": ..., "pid": ...}, once it listens, and stops on SIGTERM or when its standard input closes
(the parent died).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

HOST = "127.0.0.1"
CONTROL_PREFIX = "/__netem/"
START_TIMEOUT_S = 20.0        # from Popen to the JSON line: 0.2 s measured here (2 cores)
STOP_TIMEOUT_S = 5.0          # SIGTERM, then this long, then SIGKILL
CONTROL_TIMEOUT_S = 10.0      # one request to a control endpoint
UPSTREAM_CONNECT_TIMEOUT_S = 10.0
UPSTREAM_READ_TIMEOUT_S = 120.0   # between two reads from the server
UNPACED_CHUNK_BYTES = 256 * 1024
MIN_PACED_CHUNK_BYTES = 16 * 1024
MAX_PACED_CHUNK_BYTES = 64 * 1024
PACING_QUANTUM_S = 0.002      # a paced chunk is about this long on its connection (then clamped to 16-64 KiB)
RATE_WINDOW_S = 1.0           # the prefix limit's sliding window
STALL_POLL_S = 0.05           # a stalled body checks this often whether its client has gone
MAX_KEYS_COUNTED = 100_000    # distinct keys in Stats.gets_by_key / bytes_by_key; GETs past it: Stats.uncounted_gets
MAX_REQUESTS_REMEMBERED = 200_000   # distinct (method, path, Range) whose attempts are kept (least recently seen go)
MAX_EVENTS_REMEMBERED = 100_000     # the timeline's length: past it the oldest events go (about 100 bytes each)
CREDENTIAL_VARIABLES = ("LOADERLAB_NETEM_ACCESS_KEY", "LOADERLAB_NETEM_SECRET_KEY", "LOADERLAB_NETEM_REGION")
HOP_BY_HOP = frozenset(h.lower() for h in ("Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
                                           "Transfer-Encoding", "Upgrade", "Expect"))
SLOWDOWN_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                '<Message>Please reduce your request rate.</Message><Resource>{resource}</Resource>'
                '<RequestId>netem-{request_id}</RequestId></Error>')


@dataclass(frozen=True)
class NetworkProfile:
    """What the proxy does to each request (see the module's docstring)."""

    name: str
    latency_s: float = 0.0            # first-byte latency per request
    jitter_s: float = 0.0             # the latency is uniform in latency_s +- jitter_s
    connection_bytes_per_s: float | None = None   # per answer (HTTP/1.1: a connection carries one at a time)
    total_bytes_per_s: float | None = None        # shared by every answer
    prefix_gets_per_s: float | None = None        # per prefix (bucket + first key segment): 503 SlowDown past it
    p_slowdown: float = 0.0                       # injected 503 SlowDown
    p_drop: float = 0.0                           # connection closed mid-body
    p_stall: float = 0.0                          # body stops mid-way, connection left open for stall_s
    stall_s: float = 30.0                         # how long a stalled body sends nothing before it is closed
    ignore_range: bool = False                    # a server that ignores Range (answers 200 with the whole body)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("latency_s", "jitter_s", "stall_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"NetworkProfile {self.name!r}: {name} = {getattr(self, name)} is negative")
        for name in ("connection_bytes_per_s", "total_bytes_per_s", "prefix_gets_per_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"NetworkProfile {self.name!r}: {name} = {value} must be positive or None")
        for name in ("p_slowdown", "p_drop", "p_stall"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"NetworkProfile {self.name!r}: {name} = {getattr(self, name)} is not in [0, 1]")


# Real figures, as the course's research quotes them (2026-11-28-object-storage.md, section 4c): AWS whitepaper
# "Best Practices Design Patterns: Optimizing Amazon S3 Performance": first-byte latency of small GETs "often in the
# tens of milliseconds", one concurrent request for each 85-90 MB/s of throughput; AWS knowledge center
# "http-5xx-errors-s3" (checked): 5,500 GET/HEAD requests per second per partitioned prefix, 503 Slow Down past it.
# Scaled down because server, proxy and client share a learner's 2 cores.
# This proxy's own ceiling (loopback profile, SeaweedFS 4.48 upstream, 2-core 24 GiB development box, 2026-11-28,
# under the CPU lock, median of 3 rounds, two runs): 1,248-1,449 GET/s of 110 KB (137-159 MB/s) with obstore
# asyncio at 64 in flight (2,342-2,487 direct), 562-654 MB/s of 4 MiB bodies at 4 in flight (1,037-1,124 direct);
# boto3 threads at 16 in flight cap at 575-651 GET/s, through it or not: the client is then the ceiling. A profile
# keeps its emulated rates at about a third of the proxy's or less, so the network model, not the CPU, sets the speed.
PROFILES: dict[str, NetworkProfile] = {
    # No emulation: the server's and the proxy's own speed (the proxy still counts).
    "loopback": NetworkProfile("loopback"),
    # 50 ms +- 5 ms (S3 Standard: "tens of milliseconds"; 50 rather than 20: at 20 ms the research's prototype
    # gave 73-85 % of the model, 4-5 ms of client and proxy CPU per request), 50 MB/s per connection (S3: 85-90
    # MB/s), 200 MB/s in all (a 1.6 Gb/s NIC; about a third of the proxy's 562-654 MB/s), 150 GET/s per prefix (S3:
    # 5,500; a per-object loader trips it, a sharded one does not). Measured against r = S / (L + S/B) and
    # min(N r, 200 MB/s) with boto3 threads (same box, settings and runs as above): 110 KB objects 0.95-0.96 /
    # 0.94 / 0.91-0.92 of the model at N = 1 / 4 / 16 (18.2-18.4 / 72.1-72.4 / 278-281 obj/s; model 19.2 / 76.6 /
    # 306.5); 4 MiB bodies 0.96 / 0.90-0.93 / 0.78-0.88 (30.1-30.2 / 112-117 / 156-175 MB/s; model 31.3 / 125 /
    # 200: at 16 in flight the client's and the proxy's CPU start to show).
    "region": NetworkProfile("region", latency_s=0.050, jitter_s=0.005, connection_bytes_per_s=50e6,
                             total_bytes_per_s=200e6, prefix_gets_per_s=150.0),
    # region with faults: 5 % of requests answered 503 SlowDown, 3 % of bodies cut (the research's fault run).
    "flaky": NetworkProfile("flaky", latency_s=0.050, jitter_s=0.005, connection_bytes_per_s=50e6,
                            total_bytes_per_s=200e6, prefix_gets_per_s=150.0, p_slowdown=0.05, p_drop=0.03),
}


@dataclass(frozen=True)
class Stats:
    """The proxy's counters since the last reset (control requests excluded)."""

    requests: int = 0               # every request
    gets: int = 0                   # GET of an object (ranged or not)
    range_gets: int = 0             # ... with a Range header
    lists: int = 0                  # GET on a bucket: ListObjects, ListObjectsV2 (and a bucket's sub-resources)
    heads: int = 0
    puts: int = 0
    bytes_sent: int = 0             # body bytes sent to clients
    bytes_received: int = 0         # body bytes received from clients (PUT)
    injected_slowdowns: int = 0     # 503 SlowDown by p_slowdown
    rate_limited: int = 0           # 503 SlowDown by the per-prefix limit
    drops: int = 0                  # bodies cut short
    stalls: int = 0                 # bodies stalled (p_stall)
    errors: int = 0                 # answers >= 400 from the server, and the proxy's own 5xx (not the SlowDowns)
    in_flight: int = 0              # requests open now
    max_in_flight: int = 0          # most requests open at once
    gets_by_key: Mapping[str, int] = field(default_factory=dict, hash=False)    # "bucket/key": GETs
    bytes_by_key: Mapping[str, int] = field(default_factory=dict, hash=False)   # "bucket/key": body bytes sent
    uncounted_gets: int = 0         # GETs of keys past MAX_KEYS_COUNTED (not in gets_by_key)

    @property
    def slowdowns(self) -> int:
        """Every 503 SlowDown the proxy answered, injected or rate-limited."""
        return self.injected_slowdowns + self.rate_limited

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Stats:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


OUTCOMES = ("ok", "slowdown", "rate_limited", "dropped", "stalled", "error", "aborted", "open")


@dataclass(frozen=True)
class Event:
    """One request, as the proxy saw it (`Network.timeline()`)."""

    at_s: float        # arrival at the proxy, seconds since the last reset
    method: str        # "GET", "HEAD", ...
    key: str           # "bucket/key" ("bucket" for a LIST, "" for the service)
    byte_range: str    # the request's Range header, "" when none
    status: int        # the status answered (503 for a SlowDown; a cut body keeps its 200/206; 0 while open)
    outcome: str       # "ok"; "slowdown" (injected); "rate_limited" (the prefix limit); "dropped" (body cut by
                       # p_drop); "stalled" (body stalled by p_stall, then closed or abandoned); "error" (>= 400
                       # from the server, the proxy's own 5xx, the server's body broken
                       # off); "aborted" (the client went away mid-answer); "open" (not answered yet)
    bytes_sent: int    # body bytes of the server's answer sent to the client (a SlowDown's XML not counted, as
                       # in Stats.bytes_sent)

    @property
    def is_get(self) -> bool:
        """A GET of an object (ranged or not), not of a bucket."""
        return self.method == "GET" and "/" in self.key


def rate_over_time(events: list[Event], window_s: float, start_s: float = 0.0,
                   end_s: float | None = None) -> list[tuple[float, float]]:
    """(window start, requests per second arriving in it) for consecutive windows of `window_s` from `start_s`
    to `end_s` (default: the last event's arrival): the request rate over time, as a plot or a check reads it."""
    if window_s <= 0:
        raise ValueError(f"window_s must be positive, got {window_s}")
    end_s = max((event.at_s for event in events), default=start_s) if end_s is None else end_s
    windows = max(1, int((end_s - start_s) / window_s + 1 - 1e-9))
    counts = [0] * windows
    for event in events:
        position = int((event.at_s - start_s) // window_s)
        if 0 <= position < windows:
            counts[position] += 1
    return [(start_s + i * window_s, count / window_s) for i, count in enumerate(counts)]


class Credentials(Protocol):
    """What the proxy needs to sign a request again (loaderlab.storage.server.Endpoint has it)."""

    url: str
    access_key: str
    secret_key: str
    region: str


def resolve_profile(profile: NetworkProfile | str) -> NetworkProfile:
    """A profile by name (PROFILES) or as given; a clear error for an unknown name."""
    if isinstance(profile, NetworkProfile):
        return profile
    if profile not in PROFILES:
        raise KeyError(f"no network profile {profile!r}: known {sorted(PROFILES)}, or pass a NetworkProfile")
    return PROFILES[profile]


def unit_draw(seed: int, method: str, path: str, byte_range: str, attempt: int, purpose: str) -> float:
    """A number in [0, 1) that is a pure function of its arguments (sha256): the proxy's only source of chance."""
    digest = hashlib.sha256(repr((seed, method, path, byte_range, attempt, purpose)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


# ------------------------------------------------------------------------------------------------------------------
# The parent's side: start, talk to, stop.

@dataclass(frozen=True)
class Network:
    """A running proxy: its URL (give it to the client) and its control endpoints."""

    url: str

    def stats(self) -> Stats:
        """The counters since the last reset."""
        return Stats.from_json(self._control("GET", "stats"))

    def reset(self) -> None:
        """Zero the counters and the timeline's clock, forget the timeline, the attempts seen (the fault schedule
        starts again) and the rate windows."""
        self._control("POST", "reset")

    def timeline(self) -> list[Event]:
        """Every request since the last reset, in arrival order (the oldest dropped past MAX_EVENTS_REMEMBERED)."""
        return [Event(*row) for row in self._control("GET", "timeline")["events"]]

    def use(self, profile: NetworkProfile | str) -> None:
        """Switch to another profile without a restart (requests already open keep the one they started with)."""
        self._control("PUT", "profile", asdict(resolve_profile(profile)))

    def profile(self) -> NetworkProfile:
        """The profile in use."""
        return NetworkProfile(**self._control("GET", "profile"))

    def _control(self, method: str, what: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{CONTROL_PREFIX}{what}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=CONTROL_TIMEOUT_S) as answer:
            return json.loads(answer.read())


class NetworkStartError(RuntimeError):
    """The proxy did not start: says why (its exit status and error output, or the timeout)."""


@contextmanager
def emulated_network(upstream: str | Credentials, profile: NetworkProfile | str = "loopback",
                     timeout_s: float = START_TIMEOUT_S) -> Iterator[Network]:
    """Start the proxy in front of `upstream` (a URL, or an Endpoint: then the proxy may sign requests it must alter,
    see ignore_range), yield its Network, and stop it (terminate, wait, kill) whatever happened."""
    upstream_url = upstream if isinstance(upstream, str) else upstream.url
    env = dict(os.environ)
    for name in CREDENTIAL_VARIABLES:
        env.pop(name, None)
    if not isinstance(upstream, str):   # passed in the environment, not on the command line (ps shows that)
        env.update(zip(CREDENTIAL_VARIABLES, (upstream.access_key, upstream.secret_key, upstream.region)))
    package_root = str(Path(__file__).resolve().parents[2])   # the child runs this same code
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH"))))
    command = [sys.executable, "-m", "loaderlab.storage.netem", "--upstream", upstream_url,
               "--profile", json.dumps(asdict(resolve_profile(profile))), "--port", "0"]
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=env)
        try:
            port = _announced_port(process, errors, timeout_s)
            yield Network(f"http://{HOST}:{port}")
        finally:
            _stop(process)


def _announced_port(process: subprocess.Popen, errors: Any, timeout_s: float) -> int:
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        raise NetworkStartError(f"the network proxy did not announce its port within {timeout_s:.0f} s"
                                f"{_error_tail(errors)}") from None
    try:
        return int(json.loads(line)["port"])
    except (ValueError, KeyError, TypeError):
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        raise NetworkStartError(f"the network proxy did not start (exit status {process.poll()}, it printed "
                                f"{line[:200]!r}){_error_tail(errors)}") from None


def _error_tail(errors: Any) -> str:
    errors.seek(0)
    tail = errors.read()[-3000:].decode(errors="replace").strip()
    return f"; its error output:\n{tail}" if tail else ""


def _stop(process: subprocess.Popen) -> None:
    """Close its standard input (it stops on that alone), terminate, wait, kill; then close its output (after its
    end: a thread may still be reading it)."""
    try:
        process.stdin.close()
    except OSError:
        pass
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)
    process.stdout.close()


# ------------------------------------------------------------------------------------------------------------------
# The proxy's side (the child process).

class TokenBucket:
    """Paces bytes at `rate` per second; a credit of at most one chunk's time builds up while idle, so lateness of
    the event loop is caught up without bursting after a pause."""

    def __init__(self, rate: float, burst_bytes: int) -> None:
        self.rate = rate
        self.burst_s = burst_bytes / rate
        self.free_at = 0.0

    def reserve(self, size: int, now: float) -> float:
        """The time at which `size` more bytes have passed."""
        self.free_at = max(self.free_at, now - self.burst_s) + size / self.rate
        return self.free_at


class SlidingWindow:
    """At most `limit` admissions in any RATE_WINDOW_S, per prefix."""

    def __init__(self) -> None:
        self.admitted: dict[str, collections.deque[float]] = {}

    def admit(self, prefix: str, limit: float, now: float) -> bool:
        times = self.admitted.setdefault(prefix, collections.deque())
        while times and times[0] <= now - RATE_WINDOW_S:
            times.popleft()
        if len(times) >= limit:
            return False
        times.append(now)
        return True


@dataclass(frozen=True)
class Target:
    """What a request asks for, as the counters and the faults see it."""

    method: str
    bucket: str       # "" for the service (GET /: ListBuckets)
    key: str          # "" for a bucket
    byte_range: str   # the Range header, "" if none
    identity: str     # path and query (less presigned X-Amz-* parameters): keys the fault schedule

    @property
    def prefix(self) -> str:
        return f"{self.bucket}/{self.key.split('/', 1)[0]}"

    @property
    def is_object_get(self) -> bool:
        return self.method == "GET" and bool(self.key)


class Record:
    """An Event being written: made at arrival, its answer and bytes filled in as they happen."""

    __slots__ = ("at_s", "method", "key", "byte_range", "status", "outcome", "bytes_sent")

    def __init__(self, at_s: float, target: Target) -> None:
        self.at_s, self.method, self.byte_range = at_s, target.method, target.byte_range
        self.key = f"{target.bucket}/{target.key}" if target.key else target.bucket
        self.status, self.outcome, self.bytes_sent = 0, "open", 0

    def answered(self, status: int, outcome: str) -> None:
        self.status, self.outcome = status, outcome

    def row(self) -> list[Any]:
        """The Event's fields, in order."""
        return [round(self.at_s, 6), self.method, self.key, self.byte_range, self.status, self.outcome,
                self.bytes_sent]


class Proxy:
    """The proxy's state and its request handler (one event loop, so no locks)."""

    def __init__(self, upstream_url: str, profile: NetworkProfile, credentials: tuple[str, str, str] | None) -> None:
        self.upstream_url = upstream_url.rstrip("/")
        self.profile = profile
        self.credentials = credentials
        self.session: Any = None   # aiohttp.ClientSession, made on the loop in start()
        self.reset()

    def reset(self) -> None:
        self.counters: dict[str, int] = {f.name: 0 for f in fields(Stats)
                                         if f.name not in ("gets_by_key", "bytes_by_key", "in_flight")}
        self.gets_by_key: dict[str, int] = {}
        self.bytes_by_key: dict[str, int] = {}
        self.in_flight = 0
        self.seen: collections.OrderedDict[tuple[str, str, str], int] = collections.OrderedDict()
        self.windows = SlidingWindow()
        self.events: collections.deque[Record] = collections.deque(maxlen=MAX_EVENTS_REMEMBERED)
        self.started = time.monotonic()   # the event loop's clock (asyncio's default is time.monotonic)
        self.total_bucket: TokenBucket | None = None
        self._set_total_bucket()

    def use(self, profile: NetworkProfile) -> None:
        self.profile = profile
        self._set_total_bucket()

    def _set_total_bucket(self) -> None:
        rate = self.profile.total_bytes_per_s
        self.total_bucket = None if rate is None else TokenBucket(rate, MAX_PACED_CHUNK_BYTES)

    def stats(self) -> dict[str, Any]:
        return {**self.counters, "in_flight": self.in_flight,
                "gets_by_key": self.gets_by_key, "bytes_by_key": self.bytes_by_key}

    def attempt(self, target: Target) -> int:
        """How many times this (method, path, Range) was seen before since the last reset."""
        seen_as = (target.method, target.identity, target.byte_range)
        attempt = self.seen.pop(seen_as, 0)
        self.seen[seen_as] = attempt + 1
        if len(self.seen) > MAX_REQUESTS_REMEMBERED:
            self.seen.popitem(last=False)
        return attempt

    def count(self, target: Target) -> None:
        counters = self.counters
        counters["requests"] += 1
        if target.method == "HEAD":
            counters["heads"] += 1
        elif target.method == "PUT":
            counters["puts"] += 1
        elif target.method == "GET" and target.bucket and not target.key:
            counters["lists"] += 1
        elif target.is_object_get:
            counters["gets"] += 1
            counters["range_gets"] += bool(target.byte_range)
            name = f"{target.bucket}/{target.key}"
            if name in self.gets_by_key or len(self.gets_by_key) < MAX_KEYS_COUNTED:
                self.gets_by_key[name] = self.gets_by_key.get(name, 0) + 1
            else:
                counters["uncounted_gets"] += 1
        self.in_flight += 1
        counters["max_in_flight"] = max(counters["max_in_flight"], self.in_flight)

    def count_bytes_sent(self, target: Target, record: Record, size: int) -> None:
        self.counters["bytes_sent"] += size
        record.bytes_sent += size
        name = f"{target.bucket}/{target.key}"
        if target.is_object_get and (name in self.bytes_by_key or len(self.bytes_by_key) < MAX_KEYS_COUNTED):
            self.bytes_by_key[name] = self.bytes_by_key.get(name, 0) + size

    async def start(self) -> None:
        import aiohttp
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=UPSTREAM_CONNECT_TIMEOUT_S,
                                        sock_read=UPSTREAM_READ_TIMEOUT_S)
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout,
                                             auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar())

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def handle(self, request: Any) -> Any:
        """Every request: a control request, or one to emulate and forward."""
        from aiohttp import web
        if request.path.startswith(CONTROL_PREFIX):
            return await self.control(request, web)
        target = parse_target(request)
        profile = self.profile   # this request keeps the profile it started with
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        attempt = self.attempt(target)
        draw = lambda purpose: unit_draw(profile.seed, target.method, target.identity,  # noqa: E731
                                         target.byte_range, attempt, purpose)
        first_byte_at = arrived + max(0.0, profile.latency_s + profile.jitter_s * (2 * draw("jitter") - 1))
        self.count(target)
        record = Record(arrived - self.started, target)
        self.events.append(record)
        try:
            if (profile.prefix_gets_per_s is not None and target.method in ("GET", "HEAD") and target.key
                    and not self.windows.admit(target.prefix, profile.prefix_gets_per_s, arrived)):
                self.counters["rate_limited"] += 1
                return await self.slowdown(request, target, record, "rate_limited", first_byte_at, web)
            if draw("slowdown") < profile.p_slowdown:
                self.counters["injected_slowdowns"] += 1
                return await self.slowdown(request, target, record, "slowdown", first_byte_at, web)
            return await self.forward(request, target, record, profile, first_byte_at, draw, web)
        finally:
            self.in_flight -= 1

    async def slowdown(self, request: Any, target: Target, record: Record, outcome: str, first_byte_at: float,
                       web: Any) -> Any:
        await sleep_until(first_byte_at)
        record.answered(503, outcome)
        resource = f"/{target.bucket}/{target.key}" if target.key else f"/{target.bucket}"
        body = SLOWDOWN_XML.format(resource=resource, request_id=f"{self.counters['requests']:08d}")
        return web.Response(status=503, reason="Slow Down", body=body.encode(), content_type="application/xml")

    async def forward(self, request: Any, target: Target, record: Record, profile: NetworkProfile,
                      first_byte_at: float, draw: Any, web: Any) -> Any:
        import aiohttp
        from yarl import URL
        headers = [(name, value) for name, value in request.headers.items() if name.lower() not in HOP_BY_HOP]
        url = URL(self.upstream_url + request.raw_path, encoded=True)
        if profile.ignore_range and target.is_object_get and target.byte_range:
            headers = [(name, value) for name, value in headers if name.lower() != "range"]
            if "range" in signed_headers(request):
                if self.credentials is None:
                    return await self.cannot_sign(record, first_byte_at, web)
                headers = sign_again(request.method, str(url), headers, self.credentials)
        body = None
        if request.body_exists:
            body = counted(request.content, self.counters)
        try:
            upstream = await self.session.request(
                request.method, url, headers=headers, data=body, allow_redirects=False,
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"))
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
            self.counters["errors"] += 1
            await sleep_until(first_byte_at)
            record.answered(502, "error")
            return web.Response(status=502, text=f"netem: the upstream server {self.upstream_url} did not answer: "
                                                 f"{type(error).__name__}: {error}")
        async with upstream:
            self.counters["errors"] += upstream.status >= 400
            await sleep_until(first_byte_at)
            record.answered(upstream.status, "error" if upstream.status >= 400 else "open")
            answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    answer.headers.add(name, value)
            length = upstream.content_length
            drop_at = stall_at = None
            if target.is_object_get and upstream.status in (200, 206) and length is not None and length >= 2:
                if draw("drop") < profile.p_drop:
                    drop_at = 1 + int(draw("drop at") * (length - 1))
                elif draw("stall") < profile.p_stall:
                    stall_at = 1 + int(draw("stall at") * (length - 1))
            try:
                await answer.prepare(request)
                await self.send_body(request, upstream, answer, target, record, profile, drop_at, stall_at)
            except ConnectionError:   # the client went away: nothing to answer
                record.outcome = "aborted"
            except (aiohttp.ClientError, asyncio.TimeoutError):   # the server's body broke off: so does ours
                self.counters["errors"] += 1
                record.outcome = "error"
                end_stream(request)
            return answer

    async def send_body(self, request: Any, upstream: Any, answer: Any, target: Target, record: Record,
                        profile: NetworkProfile, drop_at: int | None, stall_at: int | None) -> None:
        loop = asyncio.get_running_loop()
        rate = profile.connection_bytes_per_s
        paced = rate is not None or self.total_bucket is not None
        chunk_bytes = UNPACED_CHUNK_BYTES if not paced else int(min(MAX_PACED_CHUNK_BYTES, max(
            MIN_PACED_CHUNK_BYTES, (rate or profile.total_bytes_per_s) * PACING_QUANTUM_S)))
        connection = None if rate is None else TokenBucket(rate, chunk_bytes)
        total = self.total_bucket
        sent = 0
        cut_at = drop_at if drop_at is not None else stall_at
        async for chunk in upstream.content.iter_chunked(chunk_bytes):
            if cut_at is not None and sent + len(chunk) >= cut_at:
                chunk = chunk[:cut_at - sent]
            if paced:
                now = loop.time()
                due = max(bucket.reserve(len(chunk), now) for bucket in (connection, total) if bucket is not None)
                if connection is not None:
                    connection.free_at = max(connection.free_at, due)
                await sleep_until(due)
            await answer.write(chunk)
            sent += len(chunk)
            self.count_bytes_sent(target, record, len(chunk))
            if drop_at is not None and sent >= drop_at:
                self.counters["drops"] += 1
                record.outcome = "dropped"
                end_stream(request)
                return
            if stall_at is not None and sent >= stall_at:
                self.counters["stalls"] += 1
                record.outcome = "stalled"
                await stall(request, profile.stall_s)
                end_stream(request)
                return
        await answer.write_eof()
        if record.outcome == "open":
            record.outcome = "ok"

    async def cannot_sign(self, record: Record, first_byte_at: float, web: Any) -> Any:
        self.counters["errors"] += 1
        await sleep_until(first_byte_at)
        record.answered(500, "error")
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NetemCannotSign</Code><Message>ignore_range '
                'must remove a signed Range header and sign the request again, but the proxy has no keys: start it '
                'with emulated_network(endpoint, ...) (an Endpoint, not a URL)</Message></Error>')
        return web.Response(status=500, body=body.encode(), content_type="application/xml")

    async def control(self, request: Any, web: Any) -> Any:
        what = request.path[len(CONTROL_PREFIX):]
        if what == "stats" and request.method == "GET":
            return web.json_response(self.stats())
        if what == "timeline" and request.method == "GET":
            return web.json_response({"events": [record.row() for record in self.events]})
        if what == "reset" and request.method == "POST":
            self.reset()
            return web.json_response({})
        if what == "profile" and request.method == "GET":
            return web.json_response(asdict(self.profile))
        if what == "profile" and request.method == "PUT":
            try:
                self.use(NetworkProfile(**await request.json()))
            except (TypeError, ValueError) as error:
                return web.json_response({"error": str(error)}, status=400)
            return web.json_response(asdict(self.profile))
        return web.json_response({"error": f"no control {request.method} {request.path}"}, status=404)


def parse_target(request: Any) -> Target:
    bucket, _, key = request.path.lstrip("/").partition("/")
    query = urlencode(sorted((name, value) for name, value in request.query.items()
                             if not name.lower().startswith("x-amz-")))
    return Target(method=request.method, bucket=bucket, key=key, byte_range=request.headers.get("Range", ""),
                  identity=f"{request.path}?{query}")


def signed_headers(request: Any) -> set[str]:
    """The headers a SigV4 request signed (Authorization header or presigned query), lower case."""
    authorization = request.headers.get("Authorization", "")
    listed = ""
    if "SignedHeaders=" in authorization:
        listed = authorization.split("SignedHeaders=", 1)[1].split(",", 1)[0]
    else:
        listed = request.query.get("X-Amz-SignedHeaders", "")
    return {name.strip().lower() for name in listed.split(";") if name.strip()}


def sign_again(method: str, url: str, headers: list[tuple[str, str]], credentials: tuple[str, str, str]
               ) -> list[tuple[str, str]]:
    """The headers, less the client's signature and Host, signed with the server's keys for `url`."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials
    dropped = {"authorization", "host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
    kept = [(name, value) for name, value in headers if name.lower() not in dropped]
    access_key, secret_key, region = credentials
    signed = AWSRequest(method=method, url=url, headers=dict(kept))
    S3SigV4Auth(BotoCredentials(access_key, secret_key), "s3", region).add_auth(signed)
    return list(signed.headers.items())


def end_stream(request: Any) -> None:
    """Close the client's connection mid-body: what is buffered still goes out, then end of stream (not a reset)."""
    if request.transport is not None:
        request.transport.close()


async def stall(request: Any, seconds: float) -> None:
    """Send nothing for `seconds`, or until the client has closed the connection (checked every STALL_POLL_S)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while loop.time() < until:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(min(STALL_POLL_S, max(0.0, until - loop.time())))


async def counted(content: Any, counters: dict[str, int]) -> Any:
    """A request body streamed to the server, counted."""
    async for chunk in content.iter_any():
        counters["bytes_received"] += len(chunk)
        yield chunk


async def sleep_until(when: float) -> None:
    delay = when - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


async def serve(upstream_url: str, profile: NetworkProfile, port: int) -> None:
    """Listen on 127.0.0.1:port, print {"port": ..., "pid": ...}, and serve until SIGTERM or standard input closes."""
    from aiohttp import web
    credentials = tuple(os.environ[name] for name in CREDENTIAL_VARIABLES) if all(
        name in os.environ for name in CREDENTIAL_VARIABLES) else None
    proxy = Proxy(upstream_url, profile, credentials)
    await proxy.start()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, port)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    except NotImplementedError:   # Windows: terminate() ends the process outright
        pass
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), loop.call_soon_threadsafe(stop.set)),
                     daemon=True).start()
    print(json.dumps({"port": runner.addresses[0][1], "pid": os.getpid()}), flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await proxy.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderlab.storage.netem", description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", required=True, help="the S3 server's URL, http://127.0.0.1:PORT")
    parser.add_argument("--profile", default="loopback", help=f"one of {sorted(PROFILES)}, or a profile as JSON")
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    args = parser.parse_args(argv)
    address = urlsplit(args.upstream)
    if address.scheme not in ("http", "https") or not address.hostname or address.path not in ("", "/"):
        parser.error(f"--upstream {args.upstream!r} is not a server's URL (http://127.0.0.1:PORT)")
    profile = (NetworkProfile(**json.loads(args.profile)) if args.profile.lstrip().startswith("{")
               else resolve_profile(args.profile))
    asyncio.run(serve(args.upstream, profile, args.port))


if __name__ == "__main__":
    main()
