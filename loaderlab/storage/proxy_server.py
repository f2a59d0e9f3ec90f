"""The emulating proxy itself: the process `loaderlab.storage.netem.emulated_network` starts (aiohttp, one event loop,
its own GIL). What it does to each request is netem's model (that module's docstring); here, how.

    python -m loaderlab.storage.proxy_server --upstream URL --profile NAME|JSON --port 0

listens on 127.0.0.1 only, announces {"port": ..., "pid": ...} once it listens (`loaderlab.processes.announce`), and
stops on SIGTERM or when its standard input closes (its owner ended: `loaderlab.processes.when_owner_leaves`). The
upstream server's keys, which it needs only to sign again a request it must alter (`ignore_range`), come as the
LOADERLAB_S3_* variables of `Endpoint.env()` (`Endpoint.from_env()` reads them), never on the command line.

Each request becomes an `Exchange` when it arrives: what it asks (`Target`), its line of the timeline (`Record`), the
profile it keeps to the end, and its fault draws.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, fields
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
from aiohttp import web
from yarl import URL

from loaderlab.processes import announce, when_owner_leaves
from loaderlab.storage.netem import (CONTROL_PREFIX, HOST, MAX_EVENTS_REMEMBERED, MAX_KEYS_COUNTED, RATE_WINDOW_S,
                                     NetworkProfile, Stats, resolve_profile, unit_draw)
from loaderlab.storage.server import Endpoint

UPSTREAM_CONNECT_TIMEOUT_S = 10.0
UPSTREAM_READ_TIMEOUT_S = 120.0   # between two reads from the server
UNPACED_CHUNK_BYTES = 256 * 1024
MIN_PACED_CHUNK_BYTES = 16 * 1024
MAX_PACED_CHUNK_BYTES = 64 * 1024
PACING_QUANTUM_S = 0.002      # a paced chunk is about this long on its connection (then clamped to 16-64 KiB)
STALL_POLL_S = 0.05           # a stalled body checks this often whether its client has gone
MAX_REQUESTS_REMEMBERED = 200_000   # distinct (method, path, Range) whose attempts are kept (least recently seen go)
HOP_BY_HOP = frozenset(h.lower() for h in ("Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
                                           "Transfer-Encoding", "Upgrade", "Expect"))
SLOWDOWN_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                '<Message>Please reduce your request rate.</Message><Resource>{resource}</Resource>'
                '<RequestId>netem-{request_id}</RequestId></Error>')
CANNOT_SIGN_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NetemCannotSign</Code><Message>ignore_range '
                   'must remove a signed Range header and sign the request again, but the proxy has no keys: start '
                   'it with emulated_network(endpoint, ...) (an Endpoint, not a URL)</Message></Error>')


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


@dataclass
class Exchange:
    """One request being answered: what it asks, its line of the timeline, the profile it arrived under (kept to its
    end) and how many times the same request came before (its fault draws depend on that)."""

    request: web.Request
    target: Target
    record: Record
    profile: NetworkProfile
    attempt: int
    arrived: float     # the event loop's clock

    def draw(self, purpose: str) -> float:
        """This request's draw for `purpose` ("jitter", "slowdown", "drop", ...): `unit_draw` of its identity."""
        return unit_draw(self.profile.seed, self.target.method, self.target.identity, self.target.byte_range,
                         self.attempt, purpose)

    @functools.cached_property
    def first_byte_at(self) -> float:
        """When its answer's headers may leave at the earliest: arrival + latency_s +- jitter_s."""
        profile = self.profile
        return self.arrived + max(0.0, profile.latency_s + profile.jitter_s * (2 * self.draw("jitter") - 1))


class Proxy:
    """The proxy's state and its request handler (one event loop, so no locks)."""

    def __init__(self, upstream_url: str, profile: NetworkProfile, credentials: Endpoint | None) -> None:
        self.upstream_url = upstream_url.rstrip("/")
        self.profile = profile
        self.credentials = credentials    # the upstream's keys, to sign again (ignore_range); None: cannot
        self.session: aiohttp.ClientSession | None = None   # made on the event loop, in start()
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
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=UPSTREAM_CONNECT_TIMEOUT_S,
                                        sock_read=UPSTREAM_READ_TIMEOUT_S)
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout,
                                             auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar())

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Every request: a control request, or one to emulate and forward."""
        if request.path.startswith(CONTROL_PREFIX):
            return await self.control(request)
        target = parse_target(request)
        arrived = asyncio.get_running_loop().time()
        exchange = Exchange(request, target, Record(arrived - self.started, target), self.profile,
                            self.attempt(target), arrived)
        self.count(target)
        self.events.append(exchange.record)
        try:
            if (exchange.profile.prefix_gets_per_s is not None and target.method in ("GET", "HEAD") and target.key
                    and not self.windows.admit(target.prefix, exchange.profile.prefix_gets_per_s, arrived)):
                self.counters["rate_limited"] += 1
                return await self.slowdown(exchange, "rate_limited")
            if exchange.draw("slowdown") < exchange.profile.p_slowdown:
                self.counters["injected_slowdowns"] += 1
                return await self.slowdown(exchange, "slowdown")
            return await self.forward(exchange)
        finally:
            self.in_flight -= 1

    async def slowdown(self, exchange: Exchange, outcome: str) -> web.Response:
        await sleep_until(exchange.first_byte_at)
        exchange.record.answered(503, outcome)
        target = exchange.target
        resource = f"/{target.bucket}/{target.key}" if target.key else f"/{target.bucket}"
        body = SLOWDOWN_XML.format(resource=resource, request_id=f"{self.counters['requests']:08d}")
        return web.Response(status=503, reason="Slow Down", body=body.encode(), content_type="application/xml")

    async def forward(self, exchange: Exchange) -> web.StreamResponse:
        request, target, record, profile = exchange.request, exchange.target, exchange.record, exchange.profile
        assert self.session is not None, "start() first"
        headers = [(name, value) for name, value in request.headers.items() if name.lower() not in HOP_BY_HOP]
        url = URL(self.upstream_url + request.raw_path, encoded=True)
        if profile.ignore_range and target.is_object_get and target.byte_range:
            headers = [(name, value) for name, value in headers if name.lower() != "range"]
            if "range" in signed_headers(request):
                if self.credentials is None:
                    return await self.cannot_sign(exchange)
                headers = sign_again(request.method, str(url), headers, self.credentials)
        body = counted(request.content, self.counters) if request.body_exists else None
        try:
            upstream = await self.session.request(
                request.method, url, headers=headers, data=body, allow_redirects=False,
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"))
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
            self.counters["errors"] += 1
            await sleep_until(exchange.first_byte_at)
            record.answered(502, "error")
            return web.Response(status=502, text=f"netem: the upstream server {self.upstream_url} did not answer: "
                                                 f"{type(error).__name__}: {error}")
        async with upstream:
            self.counters["errors"] += upstream.status >= 400
            await sleep_until(exchange.first_byte_at)
            record.answered(upstream.status, "error" if upstream.status >= 400 else "open")
            answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    answer.headers.add(name, value)
            length = upstream.content_length
            drop_at = stall_at = None
            if target.is_object_get and upstream.status in (200, 206) and length is not None and length >= 2:
                if exchange.draw("drop") < profile.p_drop:
                    drop_at = 1 + int(exchange.draw("drop at") * (length - 1))
                elif exchange.draw("stall") < profile.p_stall:
                    stall_at = 1 + int(exchange.draw("stall at") * (length - 1))
            try:
                await answer.prepare(request)
                await self.send_body(exchange, upstream, answer, drop_at, stall_at)
            except ConnectionError:   # the client went away: nothing to answer
                record.outcome = "aborted"
            except (aiohttp.ClientError, asyncio.TimeoutError):   # the server's body broke off: so does ours
                self.counters["errors"] += 1
                record.outcome = "error"
                end_stream(request)
            return answer

    async def send_body(self, exchange: Exchange, upstream: aiohttp.ClientResponse, answer: web.StreamResponse,
                        drop_at: int | None, stall_at: int | None) -> None:
        """The server's body to the client, paced; cut (end of stream) after `drop_at` bytes, or stalled after
        `stall_at` bytes, where these are given."""
        loop = asyncio.get_running_loop()
        profile, record = exchange.profile, exchange.record
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
            self.count_bytes_sent(exchange.target, record, len(chunk))
            if drop_at is not None and sent >= drop_at:
                self.counters["drops"] += 1
                record.outcome = "dropped"
                end_stream(exchange.request)
                return
            if stall_at is not None and sent >= stall_at:
                self.counters["stalls"] += 1
                record.outcome = "stalled"
                await stall(exchange.request, profile.stall_s)
                end_stream(exchange.request)
                return
        await answer.write_eof()
        if record.outcome == "open":
            record.outcome = "ok"

    async def cannot_sign(self, exchange: Exchange) -> web.Response:
        self.counters["errors"] += 1
        await sleep_until(exchange.first_byte_at)
        exchange.record.answered(500, "error")
        return web.Response(status=500, body=CANNOT_SIGN_XML.encode(), content_type="application/xml")

    async def control(self, request: web.Request) -> web.Response:
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


def parse_target(request: web.Request) -> Target:
    bucket, _, key = request.path.lstrip("/").partition("/")
    query = urlencode(sorted((name, value) for name, value in request.query.items()
                             if not name.lower().startswith("x-amz-")))
    return Target(method=request.method, bucket=bucket, key=key, byte_range=request.headers.get("Range", ""),
                  identity=f"{request.path}?{query}")


def signed_headers(request: web.Request) -> set[str]:
    """The headers a SigV4 request signed (Authorization header or presigned query), lower case."""
    authorization = request.headers.get("Authorization", "")
    if "SignedHeaders=" in authorization:
        listed = authorization.split("SignedHeaders=", 1)[1].split(",", 1)[0]
    else:
        listed = request.query.get("X-Amz-SignedHeaders", "")
    return {name.strip().lower() for name in listed.split(";") if name.strip()}


def sign_again(method: str, url: str, headers: list[tuple[str, str]], credentials: Endpoint) -> list[tuple[str, str]]:
    """The headers, less the client's signature and Host, signed with the server's keys for `url`."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    dropped = {"authorization", "host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
    kept = [(name, value) for name, value in headers if name.lower() not in dropped]
    signed = AWSRequest(method=method, url=url, headers=dict(kept))
    S3SigV4Auth(Credentials(credentials.access_key, credentials.secret_key), "s3", credentials.region).add_auth(signed)
    return list(signed.headers.items())


def end_stream(request: web.Request) -> None:
    """Close the client's connection mid-body: what is buffered still goes out, then end of stream (not a reset)."""
    if request.transport is not None:
        request.transport.close()


async def stall(request: web.Request, seconds: float) -> None:
    """Send nothing for `seconds`, or until the client has closed the connection (checked every STALL_POLL_S)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while loop.time() < until:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(min(STALL_POLL_S, max(0.0, until - loop.time())))


async def counted(content: aiohttp.StreamReader, counters: dict[str, int]) -> AsyncIterator[bytes]:
    """A request body streamed to the server, counted."""
    async for chunk in content.iter_any():
        counters["bytes_received"] += len(chunk)
        yield chunk


async def sleep_until(when: float) -> None:
    delay = when - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


async def serve(upstream_url: str, profile: NetworkProfile, port: int, credentials: Endpoint | None) -> None:
    """Listen on 127.0.0.1:port, announce {"port": ..., "pid": ...}, and serve until SIGTERM or until standard input
    closes."""
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
    when_owner_leaves(lambda: loop.call_soon_threadsafe(stop.set))
    announce(port=runner.addresses[0][1], pid=os.getpid())
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await proxy.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderlab.storage.proxy_server",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", required=True, help="the S3 server's URL, http://127.0.0.1:PORT")
    parser.add_argument("--profile", default="loopback", help="a profile's name (netem.PROFILES), or one as JSON")
    parser.add_argument("--port", type=int, default=0, help="0: a free port (announced)")
    args = parser.parse_args(argv)
    address = urlsplit(args.upstream)
    if address.scheme not in ("http", "https") or not address.hostname or address.path not in ("", "/"):
        parser.error(f"--upstream {args.upstream!r} is not a server's URL (http://127.0.0.1:PORT)")
    profile = (NetworkProfile(**json.loads(args.profile)) if args.profile.lstrip().startswith("{")
               else resolve_profile(args.profile))
    asyncio.run(serve(args.upstream, profile, args.port, Endpoint.from_env()))


if __name__ == "__main__":
    main()
