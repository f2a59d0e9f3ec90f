"""loaderlab.storage.netem, the course's emulated network: it forwards faithfully, emulates what its profile says,
replays its faults, counts, and leaves nothing running.

One proxy for the module in front of a small upstream written here (aiohttp's web server in a thread: objects with
byte ranges, and /echo/ that answers what it received); each test sets its profile with `use`. The timed tests
(`timing`) compare against the profile's model with a stated error; the last test runs boto3 through the proxy to
the course's real server (loaderlab.storage.server).
"""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from urllib.parse import urlsplit

import psutil
import pytest
from aiohttp import web

from loaderlab.processes import python_environment
from loaderlab.storage.netem import (PROFILES, Event, Network, NetworkProfile, NetworkStartError, emulated_network,
                                     rate_over_time, unit_draw)
from loaderlab.storage.server import ENV_PREFIX, Endpoint
from owners import assert_child_gone_with_its_killed_owner  # tests/ is on sys.path

BUCKET = "bucket"
PATTERN = bytes(range(251)) * 4096   # about 1 MB; offsets show (251 is prime)
REQUEST_TIMEOUT_S = 10.0
LATENCY_ERROR_S = 0.030      # measured first-byte latency within this of the profile's
PACING_ERROR = 0.25          # measured body time within 25 % of the model S / B
MiB = 1024 * 1024
STALL_READ_TIMEOUT_S = 0.5   # the stall test's client gives up after this long without a byte


def content(key: str) -> bytes:
    """The bytes of object `key`: its size is its last segment's number ("p0/obj-4194304")."""
    size = int(key.rsplit("-", 1)[1])
    return (PATTERN * (size // len(PATTERN) + 1))[:size]


async def upstream_handler(request: web.Request) -> web.StreamResponse:
    """A stand-in S3 server: /echo/... answers what it got; /bucket/key serves content(key), ranges as 206."""
    if request.path.startswith("/echo/"):
        body = await request.read()
        return web.json_response({"method": request.method, "path": request.raw_path,
                                  "headers": list(request.headers.items()), "body_size": len(body),
                                  "body_sha256": hashlib.sha256(body).hexdigest()},
                                 headers={"X-Upstream": "echo", "ETag": '"e"'})
    bucket, _, key = request.path.lstrip("/").partition("/")
    if not key:   # a LIST
        return web.Response(body=b"<ListBucketResult></ListBucketResult>", content_type="application/xml")
    data = content(key)
    if request.method == "PUT":
        await request.read()
        return web.Response(status=200)
    byte_range = request.headers.get("Range")
    if byte_range is None:
        return web.Response(body=data, content_type="application/octet-stream")
    first, last = (int(n) for n in byte_range.removeprefix("bytes=").split("-"))
    last = min(last, len(data) - 1)
    return web.Response(status=206, body=data[first:last + 1], content_type="application/octet-stream",
                        headers={"Content-Range": f"bytes {first}-{last}/{len(data)}"})


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> web.AppRunner:
        app = web.Application(client_max_size=64 * MiB)
        app.router.add_route("*", "/{tail:.*}", upstream_handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    runner = asyncio.run_coroutine_threadsafe(start(), loop).result(REQUEST_TIMEOUT_S)
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(REQUEST_TIMEOUT_S)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(REQUEST_TIMEOUT_S)
    loop.close()


@pytest.fixture(scope="module")
def proxy(upstream: str) -> Iterator[Network]:
    with emulated_network(upstream) as network:
        yield network


@pytest.fixture
def network(proxy: Network) -> Network:
    """The module's proxy, back on loopback with its counters zeroed."""
    proxy.use("loopback")
    proxy.reset()
    return proxy


class Answer:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, complete: bool, seconds: float):
        self.status, self.headers, self.body, self.complete, self.seconds = status, headers, body, complete, seconds

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key.lower() == name.lower()), None)


def request(network: Network, method: str, path: str, headers: dict[str, str] | None = None,
            body: bytes | None = None) -> Answer:
    """One request through the proxy on a connection of its own (http.client: Host as given, if given)."""
    address = urlsplit(network.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=REQUEST_TIMEOUT_S)
    headers = dict(headers or {})
    try:
        started = time.perf_counter()
        connection.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        try:
            data, complete = answer.read(), True
        except http.client.IncompleteRead as short:
            data, complete = short.partial, False
        return Answer(answer.status, answer.getheaders(), data, complete, time.perf_counter() - started)
    finally:
        connection.close()


def get(network: Network, key: str, headers: dict[str, str] | None = None) -> Answer:
    return request(network, "GET", f"/{BUCKET}/{key}", headers)


def test_headers_pass_unchanged_both_ways_host_and_authorization_included(network: Network) -> None:
    sent = [("Host", "storage.example:8333"),
            ("Authorization", "AWS4-HMAC-SHA256 Credential=AK/20261128/us-east-1/s3/aws4_request, "
                              "SignedHeaders=host;x-amz-date, Signature=0123abcd"),
            ("X-Amz-Date", "20261128T100000Z"), ("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"),
            ("User-Agent", "Boto3/1.44.8"), ("x-amz-meta-Odd_Case", "  kept  as is")]
    answer = request(network, "GET", "/echo/a%20b/c?list-type=2&prefix=x%2Fy", dict(sent))
    echoed = json.loads(answer.body)
    assert echoed["path"] == "/echo/a%20b/c?list-type=2&prefix=x%2Fy", echoed["path"]
    assert [(k.lower(), v) for k, v in echoed["headers"]] == [(k.lower(), v.strip()) for k, v in sent], (
        f"the upstream got {echoed['headers']}, the client sent {sent}")
    assert answer.header("X-Upstream") == "echo" and answer.header("ETag") == '"e"', answer.headers


def test_put_body_streams_to_the_server(network: Network) -> None:
    body = PATTERN * 3
    echoed = json.loads(request(network, "PUT", "/echo/upload", {"Content-Type": "image/jpeg"}, body).body)
    assert (echoed["method"], echoed["body_size"]) == ("PUT", len(body))
    assert echoed["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert ("Content-Length", str(len(body))) in [tuple(h) for h in echoed["headers"]], echoed["headers"]
    assert network.stats().bytes_received == len(body)


def test_206_and_content_range_pass_through(network: Network) -> None:
    answer = get(network, "p0/obj-300000", {"Range": "bytes=1000-1999"})
    assert answer.status == 206 and answer.header("Content-Range") == "bytes 1000-1999/300000", answer.headers
    assert answer.body == content("p0/obj-300000")[1000:2000]


def test_counters_count_each_kind_of_request_and_the_bytes(network: Network) -> None:
    get(network, "p0/obj-1000")
    get(network, "p0/obj-1000")
    get(network, "p1/obj-300000", {"Range": "bytes=0-99"})
    request(network, "GET", f"/{BUCKET}?list-type=2")
    request(network, "HEAD", f"/{BUCKET}/p0/obj-1000")
    request(network, "PUT", f"/{BUCKET}/p2/obj-10", body=b"0123456789")
    stats = network.stats()
    assert (stats.requests, stats.gets, stats.range_gets, stats.lists, stats.heads, stats.puts) == (6, 3, 1, 1, 1, 1)
    assert stats.gets_by_key == {f"{BUCKET}/p0/obj-1000": 2, f"{BUCKET}/p1/obj-300000": 1}
    assert stats.bytes_by_key == {f"{BUCKET}/p0/obj-1000": 2000, f"{BUCKET}/p1/obj-300000": 100}
    assert stats.bytes_sent == 2100 + len(b"<ListBucketResult></ListBucketResult>")
    assert (stats.slowdowns, stats.drops, stats.in_flight, stats.max_in_flight) == (0, 0, 0, 1)


def test_max_in_flight_is_the_most_requests_open_at_once(network: Network) -> None:
    network.use(NetworkProfile("slow", latency_s=0.3))
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda i: get(network, f"p{i}/obj-100"), range(6)))
    assert network.stats().max_in_flight == 6


def test_the_prefix_limit_answers_slowdown_xml_past_its_rate(network: Network) -> None:
    limit = 10
    network.use(NetworkProfile("limited", prefix_gets_per_s=limit))
    started = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: get(network, f"hot/obj-{100 + i}"), range(3 * limit)))
    elapsed = time.perf_counter() - started
    admitted = sum(a.status == 200 for a in answers)
    refused = [a for a in answers if a.status != 200]
    windows = 1 + int(elapsed)   # a burst longer than the window gets a fresh window's worth each second
    assert limit <= admitted <= limit * windows, f"{admitted} of {3 * limit} admitted in {elapsed:.2f} s at {limit}/s"
    assert all(a.status == 503 and b"<Code>SlowDown</Code>" in a.body for a in refused), refused[0].body
    assert get(network, "cold/obj-100").status == 200, "another prefix has a limit of its own"
    stats = network.stats()
    assert (stats.rate_limited, stats.injected_slowdowns, stats.slowdowns) == (len(refused), 0, len(refused))


def test_a_drop_cuts_the_body_short_at_the_same_byte_each_replay(network: Network) -> None:
    network.use(NetworkProfile("cut", p_drop=1.0))
    key = "p0/obj-500000"
    first = get(network, key)
    assert first.status == 200 and not first.complete and 1 <= len(first.body) < 500_000, len(first.body)
    assert first.body == content(key)[:len(first.body)]
    assert network.stats().drops == 1
    network.reset()
    assert len(get(network, key).body) == len(first.body), "the cut is a function of (seed, request, attempt)"


def test_a_stall_sends_part_of_the_body_then_nothing_until_the_client_gives_up(network: Network) -> None:
    network.use(NetworkProfile("stalled", p_stall=1.0, stall_s=2.0))
    key = "p0/obj-500000"
    address = urlsplit(network.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=STALL_READ_TIMEOUT_S)
    started = time.perf_counter()
    try:
        connection.request("GET", f"/{BUCKET}/{key}")
        answer = connection.getresponse()
        assert answer.status == 200, answer.status
        received = b""
        with pytest.raises(TimeoutError):
            while chunk := answer.read1(65536):
                received += chunk
    finally:
        connection.close()
    waited = time.perf_counter() - started
    assert 1 <= len(received) < 500_000 and received == content(key)[:len(received)], len(received)
    assert STALL_READ_TIMEOUT_S <= waited < 2.0, f"the client's read timed out after {waited:.2f} s"
    deadline = time.monotonic() + 2.0
    while network.stats().in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = network.stats()
    assert (stats.stalls, stats.drops, stats.in_flight) == (1, 0, 0), stats
    assert [e.outcome for e in network.timeline()] == ["stalled"]
    network.reset()
    started = time.perf_counter()
    whole = get(network, key)
    assert not whole.complete and len(whole.body) == len(received), "the stall replays at the same byte"
    assert whole.seconds >= 2.0, f"a client that waits sees the connection closed after stall_s: {whole.seconds:.2f} s"


def faults_seen(network: Network, keys: list[str], concurrency: int) -> set[tuple[str, int, str]]:
    """(key, attempt, fault) for every fault met fetching each key until it arrives whole (at most 6 attempts)."""
    def fetch(key: str) -> list[tuple[str, int, str]]:
        faults = []
        for attempt in range(6):
            answer = get(network, key)
            if answer.status == 200 and answer.complete:
                break
            faults.append((key, attempt, "slowdown" if answer.status == 503 else "drop"))
        return faults

    network.reset()
    with ThreadPoolExecutor(concurrency) as pool:
        return {fault for faults in pool.map(fetch, keys) for fault in faults}


def test_the_fault_schedule_replays_whatever_the_concurrency_and_changes_with_the_seed(network: Network) -> None:
    faulty = NetworkProfile("faulty", p_slowdown=0.2, p_drop=0.2, seed=7)
    network.use(faulty)
    keys = [f"p{i % 4}/obj-{20_000 + i}" for i in range(40)]
    one_at_a_time = faults_seen(network, keys, concurrency=1)
    eight_at_a_time = faults_seen(network, keys, concurrency=8)
    assert one_at_a_time == eight_at_a_time, one_at_a_time ^ eight_at_a_time
    assert {f for _, _, f in one_at_a_time} == {"slowdown", "drop"}, one_at_a_time
    assert any(attempt > 0 for _, attempt, _ in one_at_a_time), "a retry met a fault too: attempts are keyed"
    network.use(replace(faulty, seed=8))
    assert faults_seen(network, keys, concurrency=8) != one_at_a_time


def test_draws_are_a_pure_function_of_their_arguments() -> None:
    draw = unit_draw(3, "GET", "/b/k?", "bytes=0-9", 1, "drop")
    assert draw == unit_draw(3, "GET", "/b/k?", "bytes=0-9", 1, "drop") and 0 <= draw < 1
    assert draw != unit_draw(3, "GET", "/b/k?", "bytes=0-9", 2, "drop")
    assert draw != unit_draw(4, "GET", "/b/k?", "bytes=0-9", 1, "drop")


def test_ignore_range_answers_200_with_the_whole_body(network: Network) -> None:
    network.use(replace(PROFILES["loopback"], ignore_range=True))
    key = "p0/obj-300000"
    answer = get(network, key, {"Range": "bytes=1000-1999"})
    assert answer.status == 200 and answer.header("Content-Range") is None and answer.body == content(key)
    signed = get(network, key, {"Range": "bytes=0-9", "Authorization": "AWS4-HMAC-SHA256 Credential=AK/x, "
                                                                       "SignedHeaders=host;range, Signature=00"})
    assert signed.status == 500 and b"NetemCannotSign" in signed.body, "a signed Range needs the server's keys"


def test_the_timeline_says_when_each_request_came_what_it_asked_and_how_it_ended(network: Network) -> None:
    get(network, "p0/obj-1000")
    get(network, "p1/obj-300000", {"Range": "bytes=0-99"})
    request(network, "GET", f"/{BUCKET}?list-type=2")
    request(network, "HEAD", f"/{BUCKET}/p0/obj-1000")
    get(network, "p0/not-an-object")   # the stand-in server answers 500
    network.use(NetworkProfile("refused", p_slowdown=1.0))
    get(network, "p2/obj-1000")
    network.use(NetworkProfile("limited", prefix_gets_per_s=1))
    get(network, "p3/obj-1000")
    get(network, "p3/obj-1000")
    network.use(NetworkProfile("cut", p_drop=1.0))
    cut = get(network, "p4/obj-500000")
    events = network.timeline()
    assert [(e.method, e.key, e.byte_range, e.status, e.outcome) for e in events] == [
        ("GET", f"{BUCKET}/p0/obj-1000", "", 200, "ok"),
        ("GET", f"{BUCKET}/p1/obj-300000", "bytes=0-99", 206, "ok"),
        ("GET", BUCKET, "", 200, "ok"),
        ("HEAD", f"{BUCKET}/p0/obj-1000", "", 200, "ok"),
        ("GET", f"{BUCKET}/p0/not-an-object", "", 500, "error"),
        ("GET", f"{BUCKET}/p2/obj-1000", "", 503, "slowdown"),
        ("GET", f"{BUCKET}/p3/obj-1000", "", 200, "ok"),
        ("GET", f"{BUCKET}/p3/obj-1000", "", 503, "rate_limited"),
        ("GET", f"{BUCKET}/p4/obj-500000", "", 200, "dropped"),
    ], events
    assert [e.bytes_sent for e in events[:2]] == [1000, 100] and events[-1].bytes_sent == len(cut.body)
    assert [e.is_get for e in events[:4]] == [True, True, False, False]
    times = [e.at_s for e in events]
    assert times == sorted(times) and 0 <= times[0] < 1, times
    network.reset()
    assert network.timeline() == []
    get(network, "p0/obj-1000")
    assert len(network.timeline()) == 1 and network.timeline()[0].at_s < times[-1], "at_s counts from the reset"


def test_the_timeline_of_requests_open_at_once_is_in_arrival_order(network: Network) -> None:
    network.use(NetworkProfile("slow", latency_s=0.2))
    with ThreadPoolExecutor(4) as pool:
        opened = pool.submit(get, network, "p0/obj-1000")
        time.sleep(0.1)
        open_now = network.timeline()
        opened.result(REQUEST_TIMEOUT_S)
        list(pool.map(lambda i: get(network, f"p{i}/obj-100"), range(4)))
    assert [(e.status, e.outcome) for e in open_now] == [(0, "open")], open_now
    events = network.timeline()
    assert [e.outcome for e in events] == ["ok"] * 5 and [e.at_s for e in events] == sorted(e.at_s for e in events)


def test_rate_over_time_counts_arrivals_per_window() -> None:
    events = [Event(at, "GET", "b/k", "", 200, "ok", 1) for at in (0.0, 0.05, 0.1, 0.45, 0.5, 1.2)]
    assert rate_over_time(events, 0.5) == [(0.0, 8.0), (0.5, 2.0), (1.0, 2.0)]
    assert rate_over_time(events, 0.5, start_s=0.25, end_s=0.75) == [(0.25, 4.0)]
    assert rate_over_time([], 1.0) == [(0.0, 0.0)]
    with pytest.raises(ValueError, match="window_s"):
        rate_over_time(events, 0)


def test_profiles_are_checked_and_named() -> None:
    assert {"loopback", "region", "flaky"} <= set(PROFILES)
    with pytest.raises(ValueError, match="p_drop"):
        NetworkProfile("bad", p_drop=1.5)
    with pytest.raises(ValueError, match="p_stall"):
        NetworkProfile("bad", p_stall=-0.1)
    with pytest.raises(ValueError, match="stall_s"):
        NetworkProfile("bad", stall_s=-1.0)
    with pytest.raises(KeyError, match="no network profile 'nope'"):
        with emulated_network("http://127.0.0.1:9", "nope"):
            pass


def test_a_proxy_that_cannot_start_says_why() -> None:
    with pytest.raises(NetworkStartError, match="is not a server's URL"):
        with emulated_network("127.0.0.1:8333"):
            pass


def test_nothing_is_left_running_whatever_happened(upstream: str) -> None:
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    with pytest.raises(RuntimeError, match="the test's own"):
        with emulated_network(upstream) as network:
            started = [c for c in psutil.Process().children(recursive=True) if c.pid not in before]
            assert len(started) == 1 and network.stats().requests == 0
            raise RuntimeError("the test's own")
    assert not started[0].is_running() or started[0].status() == psutil.STATUS_ZOMBIE
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before


def test_a_killed_owner_leaves_no_proxy_running(upstream: str) -> None:
    """A run killed with SIGKILL cannot stop its proxy: the proxy stops itself when its standard input, the owner's
    pipe, closes."""
    owner = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "import psutil\n"
        "from loaderlab.storage.netem import emulated_network\n"
        "with emulated_network(sys.argv[1]):\n"
        "    print(psutil.Process().children()[0].pid, flush=True)\n"
        "    time.sleep(120)\n"), upstream], stdout=subprocess.PIPE, text=True, env=python_environment())
    assert_child_gone_with_its_killed_owner(owner, REQUEST_TIMEOUT_S)


def test_the_keys_go_in_the_environment_and_only_with_an_endpoint(upstream: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An Endpoint's keys reach the proxy as its LOADERLAB_S3_* variables (`Endpoint.env`), not on its command line
    (ps shows that to every user); a URL gives it none, even where this run announces a server of its own."""
    endpoint = Endpoint(upstream, "AKEXAMPLE", "secret-example", "eu-west-1")
    for given, expected in ((endpoint, endpoint.env()), (upstream, {})):
        monkeypatch.setenv(ENV_PREFIX + "URL", "http://127.0.0.1:9")
        monkeypatch.setenv(ENV_PREFIX + "ACCESS_KEY", "the-runs-own")
        monkeypatch.setenv(ENV_PREFIX + "SECRET_KEY", "the-runs-own-secret")
        before = {child.pid for child in psutil.Process().children()}
        with emulated_network(given):
            [proxy] = [child for child in psutil.Process().children() if child.pid not in before]
            announced = {name: value for name, value in proxy.environ().items() if name.startswith(ENV_PREFIX)}
            assert announced == expected
            assert not any(endpoint.secret_key in part or "the-runs-own" in part for part in proxy.cmdline())


@pytest.mark.timing
def test_first_byte_latency_is_the_profiles(network: Network) -> None:
    latency_s = 0.1
    network.use(NetworkProfile("far", latency_s=latency_s))
    get(network, "p0/obj-100")   # warm-up
    times = [get(network, f"p{i}/obj-100").seconds for i in range(5)]
    median = statistics.median(times)
    assert latency_s <= median <= latency_s + LATENCY_ERROR_S, (
        f"median {median * 1000:.0f} ms for a {latency_s * 1000:.0f} ms profile (runs: {times})")


@pytest.mark.timing
def test_pacing_follows_the_model_per_connection_and_in_total(network: Network) -> None:
    size, rate, rounds = 4 * MiB, 20e6, 3
    network.use(NetworkProfile("narrow", connection_bytes_per_s=rate))
    get(network, "p0/obj-1000")   # warm-up
    alone = statistics.median(get(network, f"p0/obj-{size}").seconds for _ in range(rounds))
    assert abs(alone - size / rate) <= PACING_ERROR * size / rate, (
        f"4 MiB at 20 MB/s per connection took {alone:.3f} s (median of {rounds}), model {size / rate:.3f} s")
    network.use(NetworkProfile("shared", total_bytes_per_s=rate))
    with ThreadPoolExecutor(2) as pool:
        shared = statistics.median(max(pool.map(lambda i: get(network, f"p{i}/obj-{size}").seconds, range(2)))
                                   for _ in range(rounds))
    assert abs(shared - 2 * size / rate) <= PACING_ERROR * 2 * size / rate, (
        f"two 4 MiB answers sharing 20 MB/s took {shared:.3f} s (median of {rounds}), model {2 * size / rate:.3f} s")


@pytest.mark.usefixtures("s3_server")
def test_boto3_through_the_proxy_to_the_real_server() -> None:
    """SigV4 made against the proxy's address verifies upstream: put, get, ranged get, list, head; ignore_range
    signs again with the server's keys; a wrong secret is still refused. The run's server (or this session's own:
    the s3_server fixture, found by shared_server)."""
    import botocore.exceptions

    from loaderlab.storage.server import shared_server

    bucket = "netem-test"
    with shared_server() as endpoint, emulated_network(endpoint, "region") as network:
        try:
            endpoint.client().create_bucket(Bucket=bucket)
        except botocore.exceptions.ClientError as error:   # a server kept from an earlier run already has it
            assert error.response["Error"]["Code"] in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"), error
        s3 = endpoint.through(network.url).client()
        s3.put_object(Bucket=bucket, Key="shards/one", Body=PATTERN)
        assert s3.get_object(Bucket=bucket, Key="shards/one")["Body"].read() == PATTERN
        ranged = s3.get_object(Bucket=bucket, Key="shards/one", Range="bytes=10-19")
        assert ranged["ResponseMetadata"]["HTTPStatusCode"] == 206 and ranged["Body"].read() == PATTERN[10:20]
        assert ranged["ContentRange"] == f"bytes 10-19/{len(PATTERN)}"
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["shards/one"]
        assert s3.head_object(Bucket=bucket, Key="shards/one")["ContentLength"] == len(PATTERN)
        stats = network.stats()
        assert (stats.puts, stats.gets, stats.range_gets, stats.lists, stats.heads, stats.errors) == (1, 2, 1, 1, 1, 0)
        network.use(replace(PROFILES["loopback"], ignore_range=True))
        whole = s3.get_object(Bucket=bucket, Key="shards/one", Range="bytes=10-19")
        assert whole["ResponseMetadata"]["HTTPStatusCode"] == 200 and whole["Body"].read() == PATTERN
        wrong = replace(endpoint, secret_key=endpoint.secret_key + "x").through(network.url).client()
        with pytest.raises(botocore.exceptions.ClientError, match="SignatureDoesNotMatch|AccessDenied"):
            wrong.get_object(Bucket=bucket, Key="shards/one")
