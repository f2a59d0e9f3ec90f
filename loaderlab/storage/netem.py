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
  S3's 503 SlowDown (XML body) without asking the server. This is S3's steady state once a prefix is partitioned:
  S3 itself partitions on key prefixes of any length, not at slashes, and only under a sustained rate, answering 503
  SlowDown while it scales;
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

This module is the model and the parent's side (`emulated_network`, `Network`); the proxy itself, the process it
starts, is `loaderlab.storage.proxy_server`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from loaderlab.processes import python_environment, read_announcement, start_owned, stop_tree
from loaderlab.storage.server import ENV_PREFIX, Endpoint

HOST = "127.0.0.1"
CONTROL_PREFIX = "/__netem/"
START_TIMEOUT_S = 20.0        # from Popen to the JSON line: 0.2 s measured here (2 cores)
STOP_TIMEOUT_S = 5.0          # SIGTERM, then this long, then SIGKILL
CONTROL_TIMEOUT_S = 10.0      # one request to a control endpoint
RATE_WINDOW_S = 1.0           # the prefix limit's sliding window
MAX_KEYS_COUNTED = 100_000    # distinct keys in Stats.gets_by_key / bytes_by_key; GETs past it: Stats.uncounted_gets
MAX_EVENTS_REMEMBERED = 100_000     # the timeline's length: past it the oldest events go (about 100 bytes each)


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
    # region with faults: 5 % of requests answered 503 SlowDown, 3 % of bodies cut (the research's fault run): far above
# S3's, where "a very small percentage of 5xx errors" is expected in normal use (AWS knowledge center
# http-5xx-errors-s3), so that the faults show in a few hundred requests.
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
def emulated_network(upstream: str | Endpoint, profile: NetworkProfile | str = "loopback",
                     timeout_s: float = START_TIMEOUT_S) -> Iterator[Network]:
    """Start the proxy in front of `upstream` (a URL, or an Endpoint: then the proxy may sign requests it must alter,
    see ignore_range), yield its Network, and stop it (`loaderlab.processes.stop_tree`) whatever happened. The
    proxy runs as long as this process holds its standard input at most, even if this process is killed."""
    upstream_url = upstream if isinstance(upstream, str) else upstream.url
    env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
    if not isinstance(upstream, str):   # the keys in the environment, not on the command line (ps shows that)
        env.update(upstream.env())
    command = [sys.executable, "-m", "loaderlab.storage.proxy_server", "--upstream", upstream_url,
               "--profile", json.dumps(asdict(resolve_profile(profile))), "--port", "0"]
    with tempfile.TemporaryFile() as errors:
        process = start_owned(command, stdout=subprocess.PIPE, stderr=errors, env=python_environment(env))
        try:
            port = _announced_port(process, errors, timeout_s)
            yield Network(f"http://{HOST}:{port}")
        finally:
            stop_tree(process, STOP_TIMEOUT_S)


def _announced_port(process: subprocess.Popen, errors: Any, timeout_s: float) -> int:
    try:
        announced = read_announcement(process, timeout_s)
    except TimeoutError:
        raise NetworkStartError(f"the network proxy did not announce its port within {timeout_s:.0f} s"
                                f"{_error_tail(errors)}") from None
    except ValueError as error:
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        raise NetworkStartError(f"the network proxy did not start (exit status {process.poll()}: it {error})"
                                f"{_error_tail(errors)}") from None
    return int(announced["port"])


def _error_tail(errors: Any) -> str:
    errors.seek(0)
    tail = errors.read()[-3000:].decode(errors="replace").strip()
    return f"; its error output:\n{tail}" if tail else ""
