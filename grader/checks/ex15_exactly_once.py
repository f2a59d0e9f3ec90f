"""Checks for exercise 15 (exactly once over a flaky network, on every rank). Every check reads the course's data
from the run's S3 server (`shared_server`) through an emulating proxy of its own (`emulated_network`), whose counters
and timeline are the ground truth. The learner's code is given the proxy's endpoint; the checks' own reads go direct.

Steps (grader/test_ex15_exactly_once.py marks them): 1 exactly once under faults; 2 503 is back-pressure; 3 equal
batches per rank; 4 resume, twice; 5 bad input.
"""

from __future__ import annotations

import functools
import random
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import ModuleType
from typing import Any

from grader.checks.ex14_remote_shards import Store, _closed_port, _expect_error, _store
from grader.support import no_leaks, require, within
from loaderlab.storage.netem import Event, NetworkProfile, rate_over_time
from loaderlab.storage.server import Endpoint

# What these checks and the exercise import: a waiting grading process imports them once (grader.preload).
PRELOAD = ("boto3",)

# ==== steps 1-2 and step 5's store errors (engineer A) ===============================================================
# Each check runs on a profile of its own with no latency unless it needs one, so that it is exact and cheap: the
# faults are the proxy's (replayable), and the proxy's timeline, never the learner's report, is what is judged.

# ---- step 1: cut bodies ----
# 40 % of the bodies cut, 10 % of the requests answered SlowDown: a fault on 46 % of the attempts. The schedule is a
# function of the requests, so a correct reader meets the same faults: on ci, seed 21 cuts 11 bodies and answers 4
# SlowDowns over the check's 13 calls, at most 3 GETs a call (seeds 1-24: 2-19 cuts; 21 cuts many for few requests).
CUT_PROFILE = NetworkProfile("ex15-cut", p_slowdown=0.1, p_drop=0.4, seed=21)
CUT_ATTEMPTS = 16            # a reader whose requests differ (another schedule) runs out with p 0.46^16 = 4e-6 a call
CUT_BASE_DELAY_S, CUT_MAX_DELAY_S = 0.002, 0.02
CUT_OBJECTS = 8              # whole objects (ci: 30-150 KB)
IGNORES_RANGE = NetworkProfile("ex15-ignores-range", ignore_range=True)
# ---- step 1: retries ----
REFUSE_ALL = NetworkProfile("ex15-refuse-all", p_slowdown=1.0)
# (max_attempts, base_delay_s, max_delay_s): waits capped at 0.3, 0.6 s; then 0.1, 0.2, 0.25, 0.25 s (max_delay_s
# binds from retry 3 on: without it, 0.4 and 0.8 s).
RETRY_ROUNDS = ((3, 0.3, 1.0), (5, 0.1, 0.25))
RETRY_CALLS = 16             # calls per round, each on an object of its own ...
RETRY_THREADS = 4            # ... from this many threads at once (clients retrying at once must not be in step)
# A wait is measured at the proxy: from one attempt's arrival to the next's. It holds the 503's round trip and the
# client's own work besides the wait: this much is allowed on top of the cap, and a wait before the last retry must
# exceed the first retry's cap by as much to show the waits grow. Full jitter fails that in a round with
# probability (1 - 1/3)^16 (round 1) and (1 - 1/5)^16 (round 2): both at once, 5e-5.
WAIT_SLACK_S = 0.1
# Full jitter draws a wait uniformly below its cap: half the waits fall below half the cap. "Equal jitter" (half the
# cap plus a random half) never does, nor does a fixed wait at the cap; a share well below one half still passes
# the client's own delay on a busy machine.
BELOW_HALF_SHARE = 0.15
SPREAD_SHARE = 0.25          # the waits before one retry number spread over at least this share of their cap
CLOSING_RETRY = (4, 0.01, 0.02)   # a server that closes every connection: each of these attempts is one connection
# ---- step 2: SlowDown as back-pressure ----
LIMIT_GETS_PER_S = 20.0      # the prefix's limit while limited
BACKPRESSURE_LATENCY_S = 0.1   # 16 in flight make 160 requests/s: 8 times the limit
LIMITED = NetworkProfile("ex15-limited", latency_s=BACKPRESSURE_LATENCY_S, prefix_gets_per_s=LIMIT_GETS_PER_S)
LIFTED = NetworkProfile("ex15-lifted", latency_s=BACKPRESSURE_LATENCY_S)
BACKPRESSURE_IN_FLIGHT = 16
BACKPRESSURE_RETRY = (10, 0.01, 0.2)   # (max_attempts, base_delay_s, max_delay_s): short waits, retries alone storm
BACKPRESSURE_OBJECTS = 240   # one prefix's objects, cycled (ci: 50 train images in images-0): the solution reads
                             # them all in about 5 s; a client that never speeds up again is stopped RECOVERY_S after
                             # the lift
LIMITED_S = 3.0              # the limit is lifted this long after the first request
SETTLE_S = 1.0               # the rate is judged from this long after the first SlowDown until the lift
# ... at most this many times the limit (requests of every answer, SlowDowns included). Measured on the 2-core
# development box (ci, 2026-11-28, busy with other work): the solution's AIMD window 28.6-29.6 requests/s, the token
# bucket alternative 30.3-33.9; the planted retry storm (max_in_flight requests open whatever the answers) 113.
NEAR_LIMIT = 2.5
RECOVERY_S = 3.0             # within this long after the lift ...
RATE_WINDOW_S = 0.5          # ... the rate over some window of this length reaches
RECOVERED = 2.5              # this many times the old limit (the solution: 100-136/s; the token bucket 94-156/s;
                             # the planted window that never grows again: 10/s)
SMALL_IN_FLIGHT = 3          # a second, fault-free run: order and the bound at another max_in_flight
SMALL_OBJECTS = 24
JITTERY = NetworkProfile("ex15-jitter", latency_s=0.02, jitter_s=0.015)   # answers arrive out of order
# ---- step 5: store errors (within exercise 14's ERROR_TIMEOUT_S) ----
ERROR_RETRY = (4, 0.01, 0.05)   # (max_attempts, base_delay_s, max_delay_s): a retried 403 or 404 shows as 4 GETs


def _policy(ex: ModuleType, attempts: int, base_delay_s: float, max_delay_s: float) -> Any:
    return require(ex, "RetryPolicy")(max_attempts=attempts, base_delay_s=base_delay_s, max_delay_s=max_delay_s)


def _events_by_key(events: Sequence[Event]) -> dict[str, list[Event]]:
    """Each object's GETs ("bucket/key"), in arrival order."""
    by_key: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        if event.is_get:
            by_key[event.key].append(event)
    return by_key


def _expected_bytes(store: Store, key: str) -> bytes:
    """The object's bytes, read from the server direct."""
    return _direct_client(store.direct).get_object(Bucket=store.remote.bucket, Key=key)["Body"].read()


@functools.lru_cache(maxsize=4)
def _direct_client(endpoint: Endpoint) -> Any:
    return endpoint.client()


def _range_of(header: str) -> tuple[int, int | None] | None:
    """(first, last) of "bytes=first-last" ("bytes=first-": last None); None for no Range or another form."""
    if not header.startswith("bytes="):
        return None
    first, _, last = header[len("bytes="):].partition("-")
    try:
        return int(first), (int(last) if last else None)
    except ValueError:
        return None


# ---- step 1: exactly once under faults -----------------------------------------------------------------------------

def _resumes(events: list[Event], first: int, last: int, whole: bool, what: str) -> None:
    """A call's GETs: each asks for first + received .. last (a whole object: no Range while nothing was received,
    and an open end allowed), received counting what the cut bodies before it sent; in all, each byte sent once."""
    received = 0
    for number, event in enumerate(events):
        asked = _range_of(event.byte_range)
        if received == 0 and whole and not event.byte_range:
            pass   # nothing received yet: the whole object again
        elif asked is None or asked[0] != first + received or asked[1] not in ((last, None) if whole else (last,)):
            before = events[number - 1] if number else None
            after = (f"after a body cut at byte {first + received:,} (the request before sent {before.bytes_sent:,} "
                     f"bytes and closed)" if before is not None and before.outcome == "dropped" else
                     f"as attempt {number + 1}")
            requests = [(e.byte_range or "whole", e.outcome, e.bytes_sent) for e in events]
            raise AssertionError(
                f"{what}: {after}, the next request asked {event.byte_range or 'no Range (the whole object)'}, not "
                f"Range bytes={first + received}-{last}: a cut body is resumed from the first byte not yet received "
                f"(the proxy's requests for it: {requests}).")
        if event.outcome in ("ok", "dropped"):
            received += event.bytes_sent
    sent = sum(event.bytes_sent for event in events)
    assert sent == last - first + 1, (
        f"{what}: the proxy sent {sent:,} bytes for {last - first + 1:,} bytes asked over {len(events)} requests: each "
        "byte once, not more (keep what arrived before a cut, ask for the rest).")


def cut_bodies_resume_from_where_they_stopped(ex: ModuleType) -> None:
    read_object = require(ex, "read_object")
    retry = _policy(ex, CUT_ATTEMPTS, CUT_BASE_DELAY_S, CUT_MAX_DELAY_S)
    with _store(CUT_PROFILE) as store:
        remote, bucket = store.remote, store.remote.bucket
        rng = random.Random(15)
        calls: list[tuple[str, tuple[int, int] | None]] = [(key, None) for key, _, _ in
                                                            rng.sample(remote.objects, CUT_OBJECTS)]
        shards = {key: len(_expected_bytes(store, key)) for key in remote.shards[:4]}
        (a, size_a), (b, size_b), (c, size_c), (d, _) = shards.items()
        calls += [(a, (0, size_a // 3)), (b, (size_b // 3, size_b // 2)), (c, (size_c - 70_001, size_c - 1)),
                  (d, (12_345, 12_345))]
        object_key, _, path = rng.choice([item for item in remote.objects if item[0] not in dict(calls)])
        calls.append((object_key, (7, path.stat().st_size - 8)))
        setting = (f"read_object under {CUT_PROFILE.p_drop:.0%} bodies cut and {CUT_PROFILE.p_slowdown:.0%} "
                   f"SlowDowns, max_attempts={CUT_ATTEMPTS}")
        for key, byte_range in calls:
            whole = _expected_bytes(store, key)
            first, last = byte_range if byte_range is not None else (0, len(whole) - 1)
            what = f"{setting}, {key!r}" + (f" byte_range={byte_range}" if byte_range else "")
            store.network.reset()
            data = within(60, what, lambda: read_object(store.endpoint, bucket, key, retry, byte_range))
            expected = whole[first:last + 1]
            assert isinstance(data, (bytes, bytearray)) and bytes(data) == expected, (
                f"{what}: returned {type(data).__name__} of {len(data) if hasattr(data, '__len__') else '?'} bytes, "
                f"not the {len(expected):,} bytes asked for" + (" (both ends of byte_range included)" if byte_range
                                                               else "") + ".")
            _resumes(_events_by_key(store.network.timeline())[f"{bucket}/{key}"], first, last, byte_range is None,
                     what)
        key = remote.shards[0]
        byte_range = (1_000, 50_999)
        store.network.use(IGNORES_RANGE)
        what = f"read_object({key!r}, byte_range={byte_range}) from a server that ignores Range (200, the whole shard)"
        try:
            data = within(60, what, lambda: read_object(store.endpoint, bucket, key, retry, byte_range))
        except (AssertionError, NotImplementedError):
            raise
        except Exception:
            return   # refused: right (so is slicing the range out of the whole body)
        expected = _expected_bytes(store, key)[byte_range[0]:byte_range[1] + 1]
        assert bytes(data) == expected, (
            f"{what}: returned {len(data):,} bytes that are not bytes {byte_range[0]}-{byte_range[1]}: check the "
            "answer to a Range request (206, its Content-Range) before you take its body as those bytes.")


def _waits(events: list[Event]) -> list[float]:
    """The time between consecutive attempts' arrivals: the wait before retry 1, 2, ... (and the 503's round trip)."""
    return [later.at_s - earlier.at_s for earlier, later in zip(events, events[1:])]


def retries_back_off_with_jitter_within_the_budget(ex: ModuleType) -> None:
    read_object = require(ex, "read_object")
    with _store(REFUSE_ALL) as store:
        bucket, keys = store.remote.bucket, [key for key, _, _ in store.remote.objects[:RETRY_CALLS]]
        _failed_connections_are_retried(ex, read_object, bucket, keys[0], store.endpoint)
        waits: dict[tuple[str, int], list[float]] = {}   # (the round's setting, retry n): the calls' waits
        caps: dict[tuple[str, int], float] = {}
        for attempts, base_delay_s, max_delay_s in RETRY_ROUNDS:
            retry = _policy(ex, attempts, base_delay_s, max_delay_s)
            setting = (f"read_object with every request answered 503 SlowDown, RetryPolicy(max_attempts={attempts}, "
                       f"base_delay_s={base_delay_s}, max_delay_s={max_delay_s}), {RETRY_CALLS} calls from "
                       f"{RETRY_THREADS} threads")
            errors: dict[str, BaseException | None] = {}

            def call(key: str) -> None:
                try:
                    read_object(store.endpoint, bucket, key, retry)
                    errors[key] = None
                except BaseException as err:   # judged below, in the check's thread
                    errors[key] = err

            store.network.reset()
            with no_leaks(setting):
                within(60, setting, lambda: _in_threads(call, keys, RETRY_THREADS))
            for err in errors.values():
                if isinstance(err, (AssertionError, NotImplementedError)):
                    raise err
            by_key = _events_by_key(store.network.timeline())
            counts = {key: len(by_key.get(f"{bucket}/{key}", [])) for key in keys}
            assert all(count == attempts for count in counts.values()), (
                f"{setting}: the proxy saw {sorted(set(counts.values()))} attempts per call (GETs per key), not "
                f"max_attempts={attempts}: make exactly max_attempts attempts, then raise (turn the client's own "
                "retries off: they multiply yours).")
            for key, err in errors.items():
                assert err is not None, f"{setting}: read_object({key!r}) returned, with every attempt refused."
                assert key in str(err) and ("SlowDown" in str(err) or "503" in str(err)), (
                    f"{setting}: read_object({key!r}) raised {type(err).__name__}: {str(err)[:300]}; the error must "
                    "name the key and the last failure (SlowDown, 503).")
            for n in range(1, attempts):
                caps[setting, n] = cap = min(max_delay_s, base_delay_s * 2 ** (n - 1))
                waits[setting, n] = [_waits(by_key[f"{bucket}/{key}"])[n - 1] for key in keys]
                worst = max(waits[setting, n])
                assert worst <= cap + WAIT_SLACK_S, (
                    f"{setting}: a call waited {worst:.3f} s before retry {n}, more than min(max_delay_s, "
                    f"base_delay_s x 2^(n-1)) = {cap:g} s (+{WAIT_SLACK_S:g} s for the round trip); waits before "
                    f"retry {n}: {sorted(round(w, 3) for w in waits[setting, n])}.")
        first_caps = {setting: cap for (setting, n), cap in caps.items() if n == 1}
        last = {setting: max(n for s, n in caps if s == setting) for setting in first_caps}
        assert any(wait > first_caps[setting] + WAIT_SLACK_S
                   for setting in last for wait in waits[setting, last[setting]]), (
            f"read_object, every request answered 503 SlowDown, rounds {RETRY_ROUNDS} ((max_attempts, base_delay_s, "
            f"max_delay_s)): no wait before the last retry exceeded the first retry's cap (+{WAIT_SLACK_S:g} s): the "
            "waits do not grow. The cap doubles with each retry: base_delay_s x 2^(n-1), up to max_delay_s.")
        for (setting, n), cap in caps.items():
            spread = waits[setting, n]
            assert max(spread) - min(spread) >= SPREAD_SHARE * cap, (
                f"{setting}: the waits before retry {n} ranged only {min(spread):.3f}-{max(spread):.3f} s over "
                f"{len(spread)} calls (cap {cap:g} s): not jittered, so clients that fail together retry together. "
                "Draw each wait at random.")
        shares = [wait / caps[slot] for slot, values in waits.items() for wait in values]
        below = sum(share < 0.5 for share in shares) / len(shares)
        assert below >= BELOW_HALF_SHARE, (
            f"read_object, every request answered 503 SlowDown, rounds {RETRY_ROUNDS}: {below:.0%} of the "
            f"{len(shares)} waits fell below half their cap (full jitter: about half; at least "
            f"{BELOW_HALF_SHARE:.0%}): full jitter draws the whole wait at random in [0, cap], not half of it.")


@contextmanager
def _closing_server() -> Iterator[tuple[str, list[int]]]:
    """A server on 127.0.0.1 that closes each connection it accepts, unanswered: its URL and [connections]."""
    accepted = [0]
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:   # timeout, or closed
                continue
            accepted[0] += 1
            connection.close()

    thread = threading.Thread(target=serve, name="grader-closing-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join()
        listener.close()


def _failed_connections_are_retried(ex: ModuleType, read_object: Callable[..., Any], bucket: str, key: str,
                                    endpoint: Endpoint) -> None:
    attempts = CLOSING_RETRY[0]
    with _closing_server() as (url, accepted):
        what = (f"read_object from a server that closes every connection unanswered ({url}), "
                f"max_attempts={attempts}")
        try:
            within(60, what, lambda: read_object(endpoint.through(url), bucket, key, _policy(ex, *CLOSING_RETRY)))
        except (AssertionError, NotImplementedError):
            raise
        except Exception as err:
            assert key in str(err), (f"{what} raised {type(err).__name__}: {str(err)[:300]}; the error must name "
                                     "the key and the last failure.")
        else:
            raise AssertionError(f"{what} returned, with every connection closed.")
    assert accepted[0] == attempts, (
        f"{what}: the server accepted {accepted[0]} connections, not max_attempts={attempts} attempts per call: a "
        "failed connection is retried, within the budget (turn the client's own retries off: they multiply yours).")


def _in_threads(call: Callable[[str], None], keys: Sequence[str], threads: int) -> None:
    """call(key) for every key, from `threads` threads at once; returns when all are done."""
    parts = [keys[i::threads] for i in range(threads)]
    workers = [threading.Thread(target=lambda part=part: [call(key) for key in part], name=f"grader-call-{i}")
               for i, part in enumerate(parts)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


# ---- step 2: 503 is back-pressure ----------------------------------------------------------------------------------

def slowdowns_lower_the_rate_then_it_recovers(ex: ModuleType) -> None:
    read_objects = require(ex, "read_objects")
    retry = _policy(ex, *BACKPRESSURE_RETRY)
    with _store(LIMITED) as store:
        bucket = store.remote.bucket
        prefix = store.remote.objects[0][0].split("/", 1)[0]
        paths = {key: path for key, _, path in store.remote.objects if key.startswith(prefix + "/")}
        keys = [list(paths)[i % len(paths)] for i in range(BACKPRESSURE_OBJECTS)]
        setting = (f"read_objects over {len(keys)} objects of one prefix, max_in_flight={BACKPRESSURE_IN_FLIGHT}, "
                   f"{BACKPRESSURE_LATENCY_S * 1000:g} ms a request, the prefix limited to {LIMIT_GETS_PER_S:g} GET/s "
                   f"for {LIMITED_S:g} s, then lifted")
        got: list[Any] = []
        failure: list[BaseException] = []
        lifted: list[float] = []   # when the limit was lifted, on the proxy's clock (from its reset)
        stopped: list[int] = []    # the items taken when the check stopped reading, if it did

        def lift_the_limit() -> None:
            store.network.use(LIFTED)
            lifted.append(time.monotonic() - reset_at)

        lift = threading.Timer(LIMITED_S, lift_the_limit)

        def run() -> None:
            lift.start()
            items: Any = None
            try:
                items = read_objects(store.endpoint, bucket, keys, BACKPRESSURE_IN_FLIGHT, retry)
                for data in items:
                    got.append(data)
                    if lifted and time.monotonic() - reset_at > lifted[0] + RECOVERY_S and len(got) < len(keys):
                        stopped.append(len(got))
                        break   # all that is judged has happened: a client that never speeds up costs no more
            except (AssertionError, NotImplementedError):
                raise
            except Exception as err:   # judged after the rate, which says why
                failure.append(err)
            finally:
                lift.cancel()   # ended before the lift: nothing left to lift
                lift.join()
                if hasattr(items, "close"):
                    items.close()

        store.network.reset()
        reset_at = time.monotonic()
        within(120, setting, run)
        lifted_at = lifted[0] if lifted else LIMITED_S
        stats, events = store.network.stats(), [event for event in store.network.timeline() if event.is_get]
        slowdowns = [event for event in events if event.status == 503]
        if slowdowns:
            start, end = slowdowns[0].at_s + SETTLE_S, min(lifted_at, events[-1].at_s)
            if end - start < SETTLE_S:   # it stopped early (raised): judge the rate from the first SlowDown on
                start = slowdowns[0].at_s
            count = sum(start <= event.at_s < end for event in events)
            rate = count / (end - start) if end > start else 0.0
            refused = sum(start <= event.at_s < end and event.status == 503 for event in events)
            until = "the lift" if end == lifted_at else f"{end:.2f} s"
            raised = (f" (and read_objects raised {type(failure[0]).__name__} after {len(got)} objects)"
                      if failure else "")
            assert rate <= NEAR_LIMIT * LIMIT_GETS_PER_S, (
                f"{setting}: from {start - slowdowns[0].at_s:g} s after the first SlowDown (at "
                f"{slowdowns[0].at_s:.2f} s) until {until}, the proxy saw {rate:.0f} requests/s ({refused} of {count} "
                f"answered SlowDown), over {NEAR_LIMIT:g}x the limit of {LIMIT_GETS_PER_S:g} GET/s: a retry "
                f"storm{raised}. Send fewer requests after SlowDowns (a smaller window of requests open, or a lower "
                "rate), not only later ones.")
        if failure:
            raise AssertionError(
                f"{setting}: read_objects raised {type(failure[0]).__name__} after {len(got)} objects: "
                f"{str(failure[0])[:300]}; the proxy saw {len(slowdowns)} SlowDowns in {len(events)} GETs. Slowed "
                "down enough, every object arrives within its retries.")
        assert stats.max_in_flight <= BACKPRESSURE_IN_FLIGHT, (
            f"{setting}: the proxy saw {stats.max_in_flight} requests open at once, more than max_in_flight.")
        _check_in_order(got, keys[:stopped[0]] if stopped else keys, paths, setting)
        after = rate_over_time(events, RATE_WINDOW_S, start_s=lifted_at, end_s=lifted_at + RECOVERY_S)
        peak = max(rate for _, rate in after)
        assert peak >= RECOVERED * LIMIT_GETS_PER_S, (
            f"{setting}: in the {RECOVERY_S:g} s after the lift the request rate peaked at {peak:.0f} requests/s (over "
            f"{RATE_WINDOW_S:g} s windows: {[round(rate) for _, rate in after]}), under {RECOVERED:g}x the old limit "
            f"of {LIMIT_GETS_PER_S:g} GET/s: the client slowed down and never came back up. Raise the rate (or the "
            "window) again while requests succeed.")
        store.network.use(JITTERY)
        keys = keys[:SMALL_OBJECTS]
        setting = (f"read_objects over {len(keys)} objects whose answers arrive out of order, "
                   f"max_in_flight={SMALL_IN_FLIGHT}")
        store.network.reset()
        with no_leaks(setting):
            got = within(60, setting,
                         lambda: list(read_objects(store.endpoint, bucket, keys, SMALL_IN_FLIGHT, retry)))
        assert store.network.stats().max_in_flight <= SMALL_IN_FLIGHT, (
            f"{setting}: the proxy saw {store.network.stats().max_in_flight} requests open at once, more than "
            "max_in_flight.")
        _check_in_order(got, keys, paths, setting)


def _check_in_order(got: list[Any], keys: Sequence[str], paths: dict[str, Any], what: str) -> None:
    assert len(got) == len(keys), f"{what}: yielded {len(got)} items for {len(keys)} keys."
    wrong = [i for i, (data, key) in enumerate(zip(got, keys)) if bytes(data) != paths[key].read_bytes()]
    assert not wrong, (
        f"{what}: {len(wrong)} of {len(keys)} items are not the bytes of the key at their position (first at "
        f"position {wrong[0]}): yield in the order of the keys, whatever order the answers arrive in.")


# ---- step 5: bad input ---------------------------------------------------------------------------------------------

def store_errors_name_what_and_where(ex: ModuleType) -> None:
    read_object, read_objects = require(ex, "read_object"), require(ex, "read_objects")
    retry = _policy(ex, *ERROR_RETRY)
    with _store() as store:
        remote, proxy = store.remote, store.endpoint
        bucket, (first, _, _), (second, _, _) = remote.bucket, remote.objects[0], remote.objects[1]
        wrong_secret = replace(proxy, secret_key=proxy.secret_key[::-1])
        missing_bucket, missing_key = "ex15-no-such-bucket", "images-0/train/no-such-class/no-such-file.jpg"
        nowhere = proxy.through(f"http://127.0.0.1:{_closed_port()}")
        cases = (
            (f"read_object with a wrong secret key (403), max_attempts={ERROR_RETRY[0]}",
             lambda: read_object(wrong_secret, bucket, first, retry), (first, proxy.url), (bucket, first)),
            (f"read_object from a bucket that does not exist (404), max_attempts={ERROR_RETRY[0]}",
             lambda: read_object(proxy, missing_bucket, first, retry, (0, 99)), (missing_bucket, proxy.url),
             (missing_bucket, first)),
            (f"read_objects over a key that does not exist (404), max_attempts={ERROR_RETRY[0]}",
             lambda: list(read_objects(proxy, bucket, [second, missing_key], 2, retry)), (missing_key, proxy.url),
             (bucket, missing_key)),
            (f"read_object from {nowhere.url}, where no server runs (the default RetryPolicy)",
             lambda: read_object(nowhere, bucket, first), (first, nowhere.url), None),
        )
        for what, run, names, counted in cases:
            store.network.reset()
            with no_leaks(what):
                _expect_error(run, what, names, "bad input must fail loudly.")
            if counted is not None:
                gets = _events_by_key(store.network.timeline()).get("/".join(counted), [])
                assert len(gets) == 1, (
                    f"{what}: the proxy saw {len(gets)} GETs of {'/'.join(counted)!r} "
                    f"({[e.status for e in gets]}): a 403 or 404 is not retried (another attempt gets the same "
                    "answer, later).")


# ==== steps 3-4 and step 5's states (engineer B) =====================================================================
