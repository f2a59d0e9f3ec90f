"""Checks for exercise 14 (a remote shard reader). Every check runs in a storage session of its own
(`loaderlab.storage.session`): the run's S3 server (the one the grading session announced, else one of its own), the
course's data in it, read through the typed index, and an emulating proxy in front, whose counters are the ground
truth: requests, GETs per key, LISTs, the most requests open. The learner's code is given the proxy's endpoint; the
checks' own reads (the expected bytes) go to the server direct.

Steps (grader/test_ex14_remote_shards.py marks them): 1 shards, not objects; 2 requests in flight; 3 an index,
range reads; 4 a local cache; 5 bad input. Timed checks compare against a baseline in the same run
(`loaderlab.bench.compare`), with targets from the network model r = S / (L + S/B).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tarfile
import tempfile
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.reader_checks import expect_error, sha256_decode, unpack_remote_sample
from grader.remote_checks import ERROR_TIMEOUT_S, closed_port, stored_bytes
from grader.support import assert_near_reference_crops, no_leaks, relative_str, require, within
from loaderlab.bench import Comparison, compare
from loaderlab.images import MEAN_TOLERANCE, WORST_TOLERANCE, Sample, reference_crop
from loaderlab.storage.bucket import RemoteSplit
from loaderlab.storage.netem import PROFILES, NetworkProfile, Stats
from loaderlab.storage.server import Endpoint
from loaderlab.storage.session import StorageSession, storage_session

# What these checks and the exercise import: a waiting grading process imports them once (grader.preload).
PRELOAD = ("boto3", "obstore")

SPLIT = "train"
# ---- step 1 ----
OBJECT_SAMPLES = 30          # objects read one by one (ci: 200 train images in 10 shards of 20)
EPOCH_SHARDS = 13            # shards read by the every-sample check: all of ci's train split, the first 13 of a larger one
PIXEL_SHARDS = 1             # shards read again with a decode, their crops compared with the reference's
RAW_SHARDS = 1               # shards read again without a decode: `data` the image's bytes, `label` an int
# A streamed shard: paced so that its bytes take STREAM_SHARD_S to arrive, its first sample must come within
# FIRST_SAMPLE_SHARE of that (the first sample is about a sixteenth of a ci shard): a reader that holds the shard
# whole before parsing it yields nothing until the last byte is in.
STREAM_SHARD_S = 2.0
FIRST_SAMPLE_SHARE = 0.5
MAX_REQUESTS_PER_SHARD = 2   # one GET streams a shard; a HEAD may go with it
TIMED_SHARDS = 2             # the timed check: these shards (32 samples on ci) against their samples as objects
# shard_samples against object_samples under `region`, as a share of the model's speed-up. The model: a request of S
# bytes takes L + S/B (L the profile's latency, B its per-connection bandwidth, the total cap being higher); the same
# samples as objects take the sum over the objects, as shards the sum over the shards: 10.0x on ci's first 2 train
# shards. Measured on the 2-core development box (ci, under the CPU lock, 2026-11-28, medians of 3 rounds): the
# solution 9.47-9.66x (3 runs), with two busy loops beside it 9.39x and 9.62x; the obstore alternative 9.59x (busy
# 9.21x), the worker-threads one 9.67x; the planted reader of one Range request per sample 0.95x. Half the model
# leaves room for a HEAD beside each shard's GET (the contract allows 2 requests per shard: about 0.56 of the model).
# The network, not the CPU, binds here (about 16 requests/s either way): on the same box on 2026-12-07, under the CPU
# lock with other work running beside it (load average 2-7), the solution 8.23x, with two busy loops 8.42x, on one
# core (taskset -c 0) 9.26x, on one core with two busy loops 8.85x; the obstore alternative 8.61x (busy 9.08x), the
# worker-threads one 8.29x (busy 9.41x); the planted per-sample reader 0.93x.
SPEEDUP_SHARE = 0.5
# ---- step 2 ----
ORDER_OBJECTS = 48
IN_FLIGHT_SETTINGS = (1, 4, 16)
# Answers that come back out of order: 20 ms +- 15 ms each.
JITTER_LATENCY_S, JITTER_S = 0.020, 0.015
JITTERY = NetworkProfile("ex14-jitter", latency_s=JITTER_LATENCY_S, jitter_s=JITTER_S)
# Requests still open when the consumer closes the generator: at 100 KB/s per answer the first key, the smallest
# object, comes first (ci: 30 KB, 0.35 s), the next ones, of the median size, take about 1 s (ci: 97 KB): a fetcher
# that does not wait for its threads leaves them running past the grace below, however busy the machine.
SLOW_BYTES_PER_S = 100e3
SLOW = NetworkProfile("ex14-slow", latency_s=0.050, connection_bytes_per_s=SLOW_BYTES_PER_S)
STOP_GRACE_S = 0.3
CLOSE_IN_FLIGHT = 8          # the generator is closed after its first item
ERROR_AT = 5                 # position of the missing key in the failing fetch
# More patterns for the bound and the order: (in_flight, keys, each key given twice, the consumer's pause per item).
MORE_FETCH_PATTERNS = ((3, 8, True, 0.010), (16, 5, False, 0.0))
IN_FLIGHT = 16               # the timed check's in_flight
TIMED_OBJECTS = 64           # four waves of 16
BASELINE_OBJECTS = 8         # one request at a time is steady: its rate over fewer objects is the same, sooner
# The timed check runs `region` with a first-byte latency of 200 ms (a region across an ocean) instead of 50 ms, so
# that at 16 in flight the network, not the CPU, sets the speed. At 50 ms the model asks 305 objects/s of 16 in flight
# (118 KB on average), about what the client, the proxy and the server sharing two cores can issue at all: a 2-core
# machine 1.5x slower than the development box gave the solution 9.51x against the 9.60x target (171 objects/s),
# and this box with its cores loaded 8.33-11.99x (below). At 200 ms the model asks 79/s, 0.20-0.55 of the machine's
# own ceiling (m10.fetch_all at 16 in flight with no emulation, in the 50 ms runs: 259-395 GET/s on two cores,
# 143-282 on one). fetch_in_flight at IN_FLIGHT against one request at a time (the checks' own loop), as a share of
# the model's speed-up min(N r, total bandwidth / S, prefixes x prefix rate) / r: 16x on ci (neither cap binds: 150
# GET/s per prefix, 200 MB/s / 118 KB). Measured on the 2-core development box (ci, 2026-12-07, under the CPU lock with
# other work running beside it (load average 2-7), medians of 2 rounds, the verdict settled): the solution 14.44x,
# with two busy loops beside it 14.92x, on one core (taskset -c 0) 13.98x, on one core with two busy loops 13.64x
# (rounds 13.48-15.11x); the obstore alternative 15.22x (busy 15.49x), the worker-threads one 14.89x (busy 15.04x);
# the planted one-at-a-time fetcher 1.00x. At 50 ms (96 objects, 16 for the baseline, 3 rounds each), the solution in
# the same four settings: 11.99x, 10.60x, 11.87x, 8.33x (rounds 6.77-13.28x). The check takes longer: 8.4 s against
# 4.6 s for the 50 ms check (the solution, one run each, side by side); one request at a time fails it in 48 s.
FAR_LATENCY_S = 0.200
FAR = replace(PROFILES["region"], name="ex14-far-region", latency_s=FAR_LATENCY_S)
IN_FLIGHT_SHARE = 0.6
# ---- step 3 ----
MAX_OVERFETCH = 0.1          # bytes fetched beyond the samples' own, as a share of theirs
READ_RUNS = ((0, 0, 6), (2, 5, 3), (4, 19, 1), (7, 3, 1))   # (shard, first sample, samples): runs of neighbours
EVERY_OTHER_SHARD = 1        # ... and every other sample of this shard: neighbours of nothing asked
SCATTERED_KEYS = 10          # another pattern: keys drawn at random from the split
# ---- step 4 ----
WATCH_POLL_S = 0.002
CACHE_BYTES_PER_S = 50e6     # a 2.4 MB shard downloads in about 50 ms: a download in progress is seen
CACHE_PROFILE = NetworkProfile("ex14-cache", connection_bytes_per_s=CACHE_BYTES_PER_S)
BUDGET_SHARDS = 2.5          # budgets in mean shard sizes
CACHE_SHARDS = 10            # the shards the cache checks ask for (ci: 2.4 MB each)
CACHE_THREADS = 4
SAME_TIME_LATENCY_S = 0.1
SAME_TIME_PROFILE = NetworkProfile("ex14-same-time", latency_s=SAME_TIME_LATENCY_S)
SAME_TIME_THREADS = 8
SAME_TIME_SHARDS = 3
LRU_ACCESSES = 30            # shard accesses per epoch, with repeats (a shuffled sample order's shards, in short runs)
LRU_BUDGET_SHARDS = 4.5
MIXED_OBJECTS = 3            # image objects among the shards of the mixed-size setting
MIXED_BUDGET_LARGEST = 2.2   # its budget, in sizes of its largest shard
FAILING_WAITERS = 6          # threads that ask for one shard at once while every body breaks off
# Every answer's body cut short by the proxy: each attempt of every GET fails.
BROKEN_BODIES = NetworkProfile("ex14-broken-bodies", latency_s=SAME_TIME_LATENCY_S, p_drop=1.0)
# ---- step 5 ----
SCRATCH_BUCKET = "ex14-broken-{pid}"


# ---- what every step uses --------------------------------------------------------------------------------------------

def _crop(data: bytes) -> Any:
    """A decode the checks hand to the learner's readers: the reference's centre crop of the file's bytes."""
    return reference_crop(io.BytesIO(bytes(data)))


def _digest_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _take(iterable: Any, what: str, seconds: float = 120) -> list[Any]:
    with no_leaks(what):
        return within(seconds, what, lambda: list(iterable))


def _typed(items: Sequence[Any], what: str, raw: bool) -> None:
    """What each value is, not only what it equals: a label is an int, and `data` (with `raw`: no decode given) the
    image file's bytes."""
    for key, data, label in items:
        assert isinstance(label, int) and not isinstance(label, bool), (
            f"{what}: the label of {key!r} is {type(label).__name__} {label!r}, not int: a label is an int (as the "
            "index gives it, or parsed from the .cls member's text).")
        assert not raw or isinstance(data, (bytes, bytearray, memoryview)), (
            f"{what}: the data of {key!r} is {type(data).__name__}, not the image file's bytes: with no decode given, "
            "yield the bytes themselves.")


def _describe(stats: Stats) -> str:
    return (f"{stats.requests} requests ({stats.gets} GETs, {stats.range_gets} of them ranged, {stats.heads} HEADs, "
            f"{stats.lists} LISTs), {stats.bytes_sent:,} bytes sent, at most {stats.max_in_flight} open at once")


def _gets_of(stats: Stats, bucket: str, key: str) -> int:
    return stats.gets_by_key.get(f"{bucket}/{key}", 0)


# ---- step 1: shards, not objects -------------------------------------------------------------------------------------

def object_samples_one_get_each(ex: ModuleType) -> None:
    object_samples = require(ex, "object_samples")
    with storage_session() as storage:
        bucket, train = storage.bucket, storage.split(SPLIT)
        chosen = random.Random(14).sample(train.samples, OBJECT_SAMPLES)   # not in stored order: the order given
        setting = f"object_samples over {len(chosen)} objects (in a shuffled order), decode=None"
        items = _take(object_samples(storage.endpoint, bucket, [(s.object_key, s.label) for s in chosen]), setting)
        stats = storage.stats()
        got = [unpack_remote_sample(item, setting) for item in items]
        _typed(items, setting, raw=True)
        assert [key for key, _, _ in got] == [s.object_key for s in chosen], (
            f"{setting}: yielded the keys {[key for key, _, _ in got][:4]}..., not the objects in the order given "
            f"({[s.object_key for s in chosen][:4]}...); yield RemoteSample(object key, data, label) for each, in "
            "order.")
        for (key, data, label), sample in zip(got, chosen):
            path = storage.dataset.local_file(SPLIT, sample)
            assert isinstance(data, (bytes, bytearray)) and bytes(data) == path.read_bytes(), (
                f"{setting}: the data of {key!r} is not the object's bytes ({type(data).__name__}, "
                f"{len(data) if hasattr(data, '__len__') else '?'} bytes; the object has {path.stat().st_size}).")
            assert label == sample.label, f"{setting}: {key!r} came with label {label}, not the {sample.label} given."
        gets = {s.object_key: _gets_of(stats, bucket, s.object_key) for s in chosen}
        assert all(count == 1 for count in gets.values()) and stats.gets == len(chosen), (
            f"{setting}: the proxy saw {_describe(stats)}; GETs per object {sorted(Counter(gets.values()).items())} "
            "((GETs, objects)): one GET per object.")
        assert stats.max_in_flight == 1, (
            f"{setting}: the proxy saw {stats.max_in_flight} requests open at once; the per-object loader sends one "
            "request at a time (the baseline the other readers are measured against).")
        storage.network.reset()
        few = chosen[:3]
        setting = "object_samples with a decode (sha256 of the bytes)"
        items = _take(object_samples(storage.endpoint, bucket, [(s.object_key, s.label) for s in few], sha256_decode),
                      setting)
        for item, sample in zip(items, few):
            data = unpack_remote_sample(item, setting)[1]
            assert data == _digest_of(storage.dataset.local_file(SPLIT, sample)), (
                f"{setting}: the data of {sample.object_key!r} is {str(data)[:40]!r}, not decode(the object's "
                "bytes): apply the decode, when given, to each object's bytes.")


def shard_samples_every_sample_once(ex: ModuleType) -> None:
    shard_samples = require(ex, "shard_samples")
    with storage_session() as storage:
        bucket, train = storage.bucket, storage.split(SPLIT)
        order = list(train.shard_keys[:EPOCH_SHARDS])
        random.Random(14).shuffle(order)   # the order given, not the written one
        expected = [sample for shard in order for sample in train.samples_of(shard)]
        by_key = {sample.key: sample for sample in expected}
        setting = f"shard_samples over {len(order)} {SPLIT} shards (in a shuffled order), decode=sha256"
        items = _take(shard_samples(storage.endpoint, bucket, order, sha256_decode), setting)
        stats = storage.stats()
        got = [unpack_remote_sample(item, setting) for item in items]
        _typed(items, setting, raw=False)
        keys = [key for key, _, _ in got]
        counts = Counter(keys)
        twice = [key for key, n in counts.items() if n > 1]
        assert not twice, f"{setting}: {len(twice)} samples came more than once (e.g. {twice[0]!r})."
        missing = [sample.key for sample in expected if sample.key not in counts]
        assert not missing, (
            f"{setting}: {len(missing)} of {len(expected)} samples never came (e.g. {missing[0]!r}"
            + (", the last sample of its shard: yield the last sample once the shard ends"
               if train.samples_of(by_key[missing[0]].shard_key)[-1].key == missing[0] else "") + ").")
        assert keys == [sample.key for sample in expected], (
            f"{setting}: every sample came once, but not shard after shard in the order given, each in written "
            f"order: first keys {keys[:3]}, expected {[sample.key for sample in expected][:3]}.")
        for key, digest, label in got:
            sample = by_key[key]
            assert digest == _digest_of(storage.dataset.local_file(SPLIT, sample)), (
                f"{setting}: sample {key!r} came as {str(digest)[:40]!r}, not the sha256 of its image's bytes: yield "
                "decode(the .jpg member's bytes).")
            assert label == sample.label, f"{setting}: sample {key!r} came with label {label}, not {sample.label}."
        per_shard = {shard: _gets_of(stats, bucket, shard) for shard in order}
        assert stats.requests <= MAX_REQUESTS_PER_SHARD * len(order) and all(per_shard.values()), (
            f"{setting}: the proxy saw {_describe(stats)} for {len(order)} shards of {len(expected)} samples; read "
            f"each shard whole in one streamed GET (at most {MAX_REQUESTS_PER_SHARD} requests per shard), never a "
            "request per sample or per block.")
        pixel_shards = order[:PIXEL_SHARDS]
        setting = f"shard_samples over {pixel_shards} with decode=the reference crop"
        items = _take(shard_samples(storage.endpoint, bucket, pixel_shards, _crop), setting)
        samples = [unpack_remote_sample(item, setting) for item in items]
        assert_near_reference_crops([crop for _, crop, _ in samples],
                                    [Sample(storage.dataset.local_file(SPLIT, by_key[key]), label)
                                     for key, _, label in samples], setting, MEAN_TOLERANCE, WORST_TOLERANCE,
                                    how="Yield decode(the .jpg member's bytes): the decode the check gives is the "
                                        "reference's.")
        raw_shards = order[:RAW_SHARDS]
        setting = f"shard_samples over {raw_shards} with decode=None"
        items = _take(shard_samples(storage.endpoint, bucket, raw_shards), setting)
        got = [unpack_remote_sample(item, setting) for item in items]
        _typed(items, setting, raw=True)
        for key, data, _ in got:
            path = storage.dataset.local_file(SPLIT, by_key[key])
            assert bytes(data) == path.read_bytes(), (
                f"{setting}: the data of {key!r} is not its image's bytes ({len(data):,} bytes; the image has "
                f"{path.stat().st_size:,}).")


def shard_samples_stream_as_they_arrive(ex: ModuleType) -> None:
    shard_samples = require(ex, "shard_samples")
    with storage_session() as storage:
        bucket, train = storage.bucket, storage.split(SPLIT)
        shard = train.shard_keys[0]
        first_key = train.samples_of(shard)[0].key
        size = _object_sizes(storage.server, bucket, [shard])[0]
        rate = size / STREAM_SHARD_S
        storage.network.use(NetworkProfile("ex14-stream", connection_bytes_per_s=rate))
        what = (f"shard_samples over {shard!r} paced at {rate / 1e3:.0f} KB/s (its {size:,} bytes take "
                f"{STREAM_SHARD_S:g} s to arrive), closed after its first sample")

        def first() -> tuple[float, Any]:
            samples = shard_samples(storage.endpoint, bucket, [shard])
            started = time.perf_counter()
            try:
                item = next(samples)
                return time.perf_counter() - started, item
            finally:
                samples.close()

        with no_leaks(what):
            took, item = within(60, what, first)
        key = unpack_remote_sample(item, what)[0]
        assert key == first_key, f"{what}: the first sample was {key!r}, not the shard's first ({first_key!r})."
        assert took <= FIRST_SAMPLE_SHARE * STREAM_SHARD_S, (
            f"{what}: the first sample came {took:.2f} s after the first next(), where the whole shard takes "
            f"{STREAM_SHARD_S:g} s to arrive and its first sample about "
            f"{STREAM_SHARD_S / len(train.samples_of(shard)):.2f} s: it came only once {took / STREAM_SHARD_S:.0%} of "
            "the shard's transfer time had passed.")


def shards_beat_objects(ex: ModuleType) -> Comparison:
    object_samples, shard_samples = require(ex, "object_samples"), require(ex, "shard_samples")
    with storage_session("region") as storage:
        bucket, train, profile = storage.bucket, storage.split(SPLIT), PROFILES["region"]
        shards = list(train.shard_keys[:TIMED_SHARDS])
        samples = [sample for shard in shards for sample in train.samples_of(shard)]
        objects = [(sample.object_key, sample.label) for sample in samples]
        shard_sizes = _object_sizes(storage.server, bucket, shards)
        model = _request_time(profile, [sample.size for sample in samples]) / _request_time(profile, shard_sizes)
        print(f"{len(samples)} samples: {len(objects)} objects against {len(shards)} shards under `region` "
              f"({profile.latency_s * 1000:g} ms, {profile.connection_bytes_per_s / 1e6:g} MB/s per connection); "
              f"model speed-up {model:.1f}x, target {SPEEDUP_SHARE:g} of it")
        return compare(
            lambda: object_samples(storage.endpoint, bucket, objects),
            lambda: shard_samples(storage.endpoint, bucket, shards),
            rounds=3, name="shard_samples", baseline_name="object_samples",
            target=SPEEDUP_SHARE * model, unit="samples",
        )


def _object_sizes(endpoint: Endpoint, bucket: str, keys: Sequence[str]) -> list[int]:
    client = endpoint.client()
    return [client.head_object(Bucket=bucket, Key=key)["ContentLength"] for key in keys]


def _request_time(profile: NetworkProfile, sizes: Sequence[int]) -> float:
    """The model's seconds for these requests one after the other: L + S/B each."""
    bandwidth = min(b for b in (profile.connection_bytes_per_s, profile.total_bytes_per_s) if b)
    return sum(profile.latency_s + size / bandwidth for size in sizes)


# ---- step 2: requests in flight --------------------------------------------------------------------------------------

def fetcher_keeps_order_within_the_bound(ex: ModuleType) -> None:
    fetch_in_flight = require(ex, "fetch_in_flight")
    with storage_session(JITTERY) as storage:
        bucket, train = storage.bucket, storage.split(SPLIT)
        chosen = random.Random(15).sample(train.samples, ORDER_OBJECTS)
        runs = [(in_flight, chosen, 0.0) for in_flight in IN_FLIGHT_SETTINGS]
        rng = random.Random(20)
        for in_flight, count, twice, pause_s in MORE_FETCH_PATTERNS:   # the bound holds on every pattern of keys
            picked = rng.sample(chosen, count) * (2 if twice else 1)
            rng.shuffle(picked)
            runs.append((in_flight, picked, pause_s))
        for in_flight, picked, pause_s in runs:
            keys = [sample.object_key for sample in picked]
            twice = len(set(keys)) < len(keys)
            storage.network.reset()
            setting = (f"fetch_in_flight over {len(keys)} objects{' (each given twice)' if twice else ''} with "
                       f"in_flight={in_flight}, answers taking {JITTER_LATENCY_S * 1000:g} +- {JITTER_S * 1000:g} ms "
                       "(they arrive out of order)"
                       + (f", the consumer pausing {pause_s * 1000:g} ms per item" if pause_s else ""))
            got = _take(_paused(fetch_in_flight(storage.endpoint, bucket, keys, in_flight), pause_s), setting)
            stats = storage.stats()
            assert stats.max_in_flight <= in_flight, (
                f"{setting}: the proxy saw {stats.max_in_flight} requests open at once, more than in_flight="
                f"{in_flight}: bound the requests open (a pool of in_flight threads, a semaphore), not only the "
                "results kept.")
            expected = [_digest_of(storage.dataset.local_file(SPLIT, sample)) for sample in picked]
            digests = [sha256_decode(data) for data in got]
            assert len(digests) == len(expected), f"{setting}: yielded {len(digests)} items for {len(keys)} keys."
            wrong = [i for i, (a, b) in enumerate(zip(digests, expected)) if a != b]
            placed = sum(digest in expected for digest in digests)
            assert not wrong, (
                f"{setting}: {len(wrong)} of {len(keys)} items are not the bytes of the key at their position (first "
                f"at position {wrong[0]}; {placed} of them are some key's bytes): out of order. Yield in the order "
                "of the keys, whatever order the answers arrive in.")
            assert stats.gets <= len(keys), (
                f"{setting}: the proxy saw {_describe(stats)} for {len(keys)} keys: one GET per key given.")


def _paused(items: Iterator[Any], pause_s: float) -> Iterator[Any]:
    """A consumer that takes `pause_s` over each item."""
    for item in items:
        yield item
        time.sleep(pause_s)


def fetcher_stops_on_close_and_on_error(ex: ModuleType) -> None:
    fetch_in_flight = require(ex, "fetch_in_flight")
    with storage_session(SLOW) as storage:
        bucket, train = storage.bucket, storage.split(SPLIT)
        by_size = sorted(train.samples, key=lambda sample: sample.size)
        middle = len(by_size) // 2
        keys = [sample.object_key for sample in by_size[:1] + by_size[middle:middle + 2 * CLOSE_IN_FLIGHT]]
        what = (f"fetch_in_flight(in_flight={CLOSE_IN_FLIGHT}) closed after its first item, with "
                f"{CLOSE_IN_FLIGHT - 1} requests still open (answers paced at "
                f"{SLOW_BYTES_PER_S / 1e3:g} KB/s)")

        def close_early() -> None:
            items = fetch_in_flight(storage.endpoint, bucket, keys, CLOSE_IN_FLIGHT)
            next(items)
            items.close()

        with no_leaks(what, grace_s=STOP_GRACE_S):
            within(60, what, close_early)
        storage.network.use("loopback")
        keys = [sample.object_key for sample in train.samples[:20]]
        keys[ERROR_AT] = "images-0/no-such-object.jpg"
        what = f"fetch_in_flight(in_flight=4) over keys whose #{ERROR_AT} does not exist"
        with no_leaks(what, grace_s=STOP_GRACE_S):
            try:
                within(60, what, lambda: list(fetch_in_flight(storage.endpoint, bucket, keys, 4)))
            except AssertionError:
                raise
            except NotImplementedError:
                raise
            except Exception:
                pass
            else:
                raise AssertionError(f"{what}: the fetch ended without an error; a GET that fails must raise.")


def in_flight_reaches_the_model(ex: ModuleType) -> Comparison:
    fetch_in_flight = require(ex, "fetch_in_flight")
    with storage_session(FAR) as storage:
        bucket, profile = storage.bucket, FAR
        chosen = storage.split(SPLIT).samples[:TIMED_OBJECTS]
        keys = [sample.object_key for sample in chosen]
        mean_size = sum(sample.size for sample in chosen) / len(chosen)
        prefixes = len({key.split("/")[0] for key in keys})
        one = 1 / _request_time(profile, [mean_size])
        model = min(IN_FLIGHT * one, profile.total_bytes_per_s / mean_size,
                    prefixes * profile.prefix_gets_per_s) / one
        print(f"{len(keys)} objects of {mean_size / 1e3:.0f} KB on average over {prefixes} prefixes under `region` "
              f"with {FAR_LATENCY_S * 1000:g} ms latency; "
              f"model speed-up at {IN_FLIGHT} in flight {model:.1f}x, target {IN_FLIGHT_SHARE:g} of it")
        client = storage.endpoint.client()
        return compare(
            lambda: _one_at_a_time(client, bucket, keys[:BASELINE_OBJECTS]),
            lambda: fetch_in_flight(storage.endpoint, bucket, keys, IN_FLIGHT),
            rounds=3, name=f"fetch_in_flight({IN_FLIGHT})", baseline_name="one request at a time",
            target=IN_FLIGHT_SHARE * model, unit="objects",
        )


def _one_at_a_time(client: Any, bucket: str, keys: Sequence[str]) -> Iterator[bytes]:
    for key in keys:
        yield client.get_object(Bucket=bucket, Key=key)["Body"].read()


# ---- step 3: an index, range reads -----------------------------------------------------------------------------------

def _index(ex: ModuleType, storage: StorageSession, what: str, split: RemoteSplit) -> Any:
    shard_index = require(ex, "ShardIndex")
    return within(60, what, lambda: shard_index(storage.endpoint, storage.bucket, split.index_key))


def _read(index: Any, keys: list[str], what: str) -> list[tuple[str, Any, int]]:
    items = within(60, what, lambda: index.read(keys))
    assert isinstance(items, list), f"{what}: read returned {type(items).__name__}, not a list of RemoteSample."
    got = [unpack_remote_sample(item, what) for item in items]
    _typed(items, what, raw=True)
    return got


def _check_samples(got: list[tuple[str, Any, int]], keys: list[str], storage: StorageSession, split: str,
                   what: str) -> None:
    by_key = storage.split(split).by_key()
    assert [key for key, _, _ in got] == keys, (
        f"{what}: read returned the keys {[key for key, _, _ in got][:4]}..., not those asked for, in that order "
        f"({keys[:4]}...).")
    for key, data, label in got:
        expected = storage.dataset.local_file(split, by_key[key]).read_bytes()
        assert isinstance(data, (bytes, bytearray, memoryview)) and bytes(data) == expected, (
            f"{what}: the data of {key!r} is not its image's bytes ({len(data) if hasattr(data, '__len__') else '?'} "
            f"bytes, first {bytes(data[:8]) if hasattr(data, '__getitem__') else data!r}; expected {len(expected)} "
            f"bytes): fetch bytes offset .. offset + size - 1 of its shard (a Range's end is inclusive).")
        assert label == by_key[key].label, f"{what}: {key!r} came with label {label}, not {by_key[key].label}."


def index_read_once_never_listed(ex: ModuleType) -> None:
    with storage_session() as storage:
        train = storage.split(SPLIT)
        index = _index(ex, storage, "ShardIndex(endpoint, bucket, index_key)", train)
        rng = random.Random(16)
        keys = [sample.key for sample in train.samples]
        for round_ in range(3):
            asked = rng.sample(keys, 5)
            asked.append(asked[0])      # a key asked twice comes twice
            what = f"ShardIndex.read, call {round_ + 1} of 3, 6 keys in a shuffled order (one of them twice)"
            _check_samples(_read(index, asked, what), asked, storage, SPLIT, what)
        stats = storage.stats()
        reads = _gets_of(stats, storage.bucket, train.index_key)
        assert stats.lists == 0 and reads == 1, (
            f"ShardIndex made once and read 3 times: the proxy saw {stats.lists} LISTs and {reads} GETs of the index "
            f"{train.index_key!r}: read the index once, in __init__, and never LIST: the index says where every "
            "sample is.")
        val = storage.split("val")
        index = _index(ex, storage, f"ShardIndex over {val.index_key!r}", val)
        asked = [sample.key for sample in val.samples[::7]]
        what = f"ShardIndex({val.index_key!r}).read of {len(asked)} keys"
        _check_samples(_read(index, asked, what), asked, storage, "val", what)


def _read_patterns(split: RemoteSplit) -> list[tuple[str, list[str]]]:
    """Patterns of keys for ShardIndex.read: (what, keys). The bounds hold on each, not only on one."""
    rng = random.Random(17)
    shards = [[sample.key for sample in split.samples_of(shard)] for shard in split.shard_keys]
    mixed = [key for shard, first, count in READ_RUNS for key in shards[shard][first:first + count]]
    mixed += shards[EVERY_OTHER_SHARD][::2]
    rng.shuffle(mixed)
    whole = list(shards[6])
    rng.shuffle(whole)
    twice = shards[2][4:9]
    return [
        (f"{len(READ_RUNS)} runs of neighbours in shards and every other sample of a shard (shuffled)", mixed),
        (f"{SCATTERED_KEYS} keys drawn at random from the split", rng.sample([s.key for s in split.samples],
                                                                            SCATTERED_KEYS)),
        ("a run of 9 neighbours, the last first", shards[3][2:11][::-1]),
        ("runs of 1, 2, 3 and 5 neighbours, one sample apart", [shards[5][i] for i in (0, 2, 3, 5, 6, 7, 9, 10, 11,
                                                                                        12, 13)]),
        ("every sample of a shard (shuffled)", whole),
        ("the last sample of a shard and the first of the next", [shards[7][-1], shards[8][0]]),
        ("5 neighbours, each asked twice", twice + twice[::-1]),
    ]


def _runs_of(split: RemoteSplit, keys: Sequence[str]) -> int:
    """How many runs of neighbours (next to each other in a shard's written order) the distinct keys make."""
    place = {sample.key: number for number, sample in enumerate(split.samples)}
    places = sorted({place[key] for key in keys})
    return sum(1 for before, now in zip([None, *places], places)
               if before is None or now != before + 1
               or split.samples[now].shard_key != split.samples[before].shard_key)


def range_reads_coalesce_neighbours(ex: ModuleType) -> None:
    with storage_session() as storage:
        train = storage.split(SPLIT)
        index = _index(ex, storage, "ShardIndex(endpoint, bucket, index_key)", train)
        sizes = {sample.key: sample.size for sample in train.samples}
        for pattern, asked in _read_patterns(train):
            runs = _runs_of(train, asked)
            own = sum(sizes[key] for key in set(asked))
            storage.network.reset()
            what = f"ShardIndex.read of {len(asked)} keys, {pattern}: {runs} runs of neighbours"
            _check_samples(_read(index, asked, what), asked, storage, SPLIT, what)
            stats = storage.stats()
            assert stats.gets == stats.range_gets > 0, (
                f"{what}: the proxy saw {_describe(stats)}: fetch the samples with Range requests, not whole shards.")
            assert stats.range_gets <= runs, (
                f"{what}: {stats.range_gets} Range requests for {runs} runs of neighbours: samples next to each other "
                "in a shard (only tar headers between them) must come in one request, and a key asked twice is fetched "
                "once. Sort the shard's distinct samples by offset and merge while the gap is a header or two.")
            overfetch = stats.bytes_sent / own - 1
            assert overfetch <= MAX_OVERFETCH, (
                f"{what}: {stats.bytes_sent:,} bytes fetched for {own:,} bytes of samples (each counted once), "
                f"{overfetch:.0%} more (at most {MAX_OVERFETCH:.0%}): fetch each sample's bytes once, and merge "
                "neighbours only, not samples with other samples between them.")


def non_206_answers_are_refused(ex: ModuleType) -> None:
    with storage_session() as storage:
        train = storage.split(SPLIT)
        index = _index(ex, storage, "ShardIndex(endpoint, bucket, index_key)", train)
        shard = train.shard_keys[1]
        asked = [sample.key for sample in train.samples_of(shard)[3:5]]
        storage.network.use(NetworkProfile("ex14-ignores-range", ignore_range=True))
        what = f"ShardIndex.read({asked}) from a server that ignores Range (it answers 200 with the whole shard)"
        try:
            got = _read(index, asked, what)
        except (AssertionError, NotImplementedError):
            raise
        except Exception as err:
            assert shard in str(err), (
                f"{what} raised {type(err).__name__}: {err}; name the shard ({shard!r}) in the message.")
        else:
            by_key = train.by_key()
            right = sum(bytes(data) == storage.dataset.local_file(SPLIT, by_key[key]).read_bytes()
                        for key, data, _ in got)
            raise AssertionError(
                f"{what}: read accepted the 200 answer and returned {len(got)} samples ({right} of them right): an "
                "answer that is not 206 Partial Content must raise an error naming the shard, never be read as the "
                "sample (the whole shard came for two samples).")


# ---- step 4: a local cache -------------------------------------------------------------------------------------------

def _folder_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            continue   # removed while walking
    return total


class FolderWatch:
    """Samples a folder's size every WATCH_POLL_S in a thread of its own; `peak` is the most it saw."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak, self.samples = folder, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="grader-folder-watch", daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _folder_bytes(self.folder))
            self.samples += 1
            time.sleep(WATCH_POLL_S)

    def __enter__(self) -> FolderWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def _shard_bytes(storage: StorageSession) -> dict[str, bytes]:
    """The first CACHE_SHARDS shards' bytes, read from the server direct: the shards the cache checks ask for."""
    return {key: stored_bytes(storage, key) for key in storage.split(SPLIT).shard_keys[:CACHE_SHARDS]}


def _cache(ex: ModuleType, storage: StorageSession, cache_dir: Path | str, budget: int) -> Any:
    shard_cache = require(ex, "ShardCache")
    return within(60, "ShardCache(...)", lambda: shard_cache(storage.endpoint, storage.bucket, cache_dir, budget))


def _get(cache: Any, key: str, shards: dict[str, bytes], what: str) -> None:
    data = within(60, what, lambda: cache.get(key))
    other = next((name for name, value in shards.items() if name != key and isinstance(data, (bytes, bytearray,
                  memoryview)) and bytes(data) == value), None)
    assert other is None, (
        f"{what}: get({key!r}) returned the bytes of {other!r}: each key is a shard of its own (a file named after "
        "the basename alone serves one shard for another).")
    assert isinstance(data, (bytes, bytearray, memoryview)) and bytes(data) == shards[key], (
        f"{what}: get({key!r}) returned {type(data).__name__} of {len(data) if hasattr(data, '__len__') else '?'} "
        f"bytes, not the shard's {len(shards[key])} bytes.")


def _mixed_objects(storage: StorageSession) -> dict[str, bytes]:
    """Objects of many sizes for the cache: four train shards, the first three val shards (none with a train shard's
    basename among them; ci's third is half the others), and a few images."""
    train, val = storage.split(SPLIT), storage.split("val")
    keys = [*train.shard_keys[3:7], *val.shard_keys[:3], *(s.object_key for s in train.samples[:MIXED_OBJECTS])]
    return {key: stored_bytes(storage, key) for key in keys}


def cache_stays_within_budget(ex: ModuleType) -> None:
    with storage_session(CACHE_PROFILE) as storage, tempfile.TemporaryDirectory(prefix="loaderlab-ex14-") as scratch:
        shards = _shard_bytes(storage)
        mean = sum(map(len, shards.values())) / len(shards)
        mixed = _mixed_objects(storage)
        settings = ((Path(scratch) / "cache" / "nested", 1, shards, int(BUDGET_SHARDS * mean)),
                    (relative_str(Path(scratch) / "other"), CACHE_THREADS, shards, int(BUDGET_SHARDS * mean) + 12_345),
                    (Path(scratch) / "mixed", CACHE_THREADS, mixed,
                     int(MIXED_BUDGET_LARGEST * max(map(len, mixed.values())))))
        rng = random.Random(18)
        for folder, threads, objects, budget in settings:
            cache = _cache(ex, storage, folder, budget)
            keys = list(objects)
            order = [rng.choice(keys) for _ in range(3 * len(keys))]
            sizes = sorted(map(len, objects.values()))
            what = (f"ShardCache(cache_dir={str(folder)!r} as a {type(folder).__name__}, budget_bytes={budget:,}), "
                    f"{len(order)} gets from {threads} thread{'s' if threads > 1 else ''}"
                    + ("" if objects is shards else f" started at once, over {len(keys)} objects of {sizes[0]:,} to "
                       f"{sizes[-1]:,} bytes (shards of both splits, and images)"))
            failures: list[str] = []
            start = None if objects is shards else threading.Barrier(threads)
            with FolderWatch(Path(folder)) as watch, no_leaks(what):
                within(120, what, lambda: _run_threads(cache, [order[i::threads] for i in range(threads)], objects,
                                                        what, failures, start))
            assert not failures, failures[0]
            assert watch.peak <= budget, (
                f"{what}: the folder held {watch.peak:,} bytes at one moment (sampled every {WATCH_POLL_S * 1000:g} "
                f"ms), over the budget of {budget:,}: make room before writing, count every file in cache_dir (a "
                "download in progress too), and count bytes, not shards.")
            assert watch.samples > 1, f"{what}: the folder's size was never sampled."


def cache_keeps_each_shard_apart(ex: ModuleType) -> None:
    with storage_session() as storage, tempfile.TemporaryDirectory(prefix="loaderlab-ex14-") as scratch:
        train, val = storage.split(SPLIT).shard_keys[0], storage.split("val").shard_keys[0]
        shards = {key: stored_bytes(storage, key) for key in (train, val)}
        budget = 4 * sum(map(len, shards.values()))
        cache = _cache(ex, storage, Path(scratch) / "cache", budget)
        what = (f"ShardCache(budget_bytes={budget:,}): get({train!r}), get({val!r}) (the same basename in "
                "another split), then each again")
        for key in (train, val, train, val):
            _get(cache, key, shards, what)


def _at_once(call: Callable[[], Any], threads: int, timeout_s: float) -> list[tuple[str, Any] | None]:
    """`call` from `threads` threads started together: each one's ("returned", value) or ("raised", error), or None
    for a thread still inside `call` `timeout_s` after the start (left behind: a daemon thread)."""
    outcomes: list[tuple[str, Any] | None] = [None] * threads
    start = threading.Barrier(threads)

    def run(number: int) -> None:
        try:
            start.wait(30)
            outcomes[number] = ("returned", call())
        except Exception as err:
            outcomes[number] = ("raised", err)

    workers = [threading.Thread(target=run, args=(n,), name=f"grader-waiter-{n}", daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    return list(outcomes)


def cache_failure_reaches_every_waiter(ex: ModuleType) -> None:
    with storage_session(BROKEN_BODIES) as storage, tempfile.TemporaryDirectory(prefix="loaderlab-ex14-") as scratch:
        shard = storage.split(SPLIT).shard_keys[0]
        shards = {shard: stored_bytes(storage, shard)}
        cache = _cache(ex, storage, Path(scratch) / "cache", 2 * len(shards[shard]))
        what = (f"{FAILING_WAITERS} threads asking ShardCache for {shard!r} at once, while every answer's body breaks "
                "off (each attempt of each GET fails)")
        outcomes = _at_once(lambda: cache.get(shard), FAILING_WAITERS, ERROR_TIMEOUT_S)
        waiting = sum(outcome is None for outcome in outcomes)
        assert not waiting, (
            f"{what}: {waiting} of {FAILING_WAITERS} threads were still waiting in get {ERROR_TIMEOUT_S:g} s later: "
            "when the fetch they wait on fails, every waiter must get an error promptly (or try again itself), "
            "never wait on.")
        for kind, value in filter(None, outcomes):
            assert kind == "raised" or bytes(value) == shards[shard], (
                f"{what}: get returned {len(value):,} bytes, not the shard's {len(shards[shard]):,}, with no error.")
        storage.network.use("loopback")
        what = f"ShardCache.get({shard!r}) once the network works again, after that fetch failed"
        try:
            _get(cache, shard, shards, what)
        except (AssertionError, NotImplementedError):
            raise
        except Exception as err:
            raise AssertionError(f"{what} raised {type(err).__name__}: {str(err)[:200]}: a fetch that failed must "
                                 "not be kept; the next get tries again.") from err


def _run_threads(cache: Any, parts: list[list[str]], shards: dict[str, bytes], what: str,
                 failures: list[str], start: threading.Barrier | None = None) -> None:
    """Each part's gets in a thread of its own (after `start`, where given); what went wrong lands in `failures`."""
    def run(part: list[str]) -> None:
        try:
            if start is not None:
                start.wait(30)
            for key in part:
                _get(cache, key, shards, what)
        except AssertionError as err:
            failures.append(str(err))
        except Exception as err:
            failures.append(f"{what}: get raised {type(err).__name__}: {err}")

    workers = [threading.Thread(target=run, args=(part,), name=f"grader-cache-{i}") for i, part in enumerate(parts)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def no_shard_fetched_twice_at_once(ex: ModuleType) -> None:
    with (storage_session(SAME_TIME_PROFILE) as storage,
          tempfile.TemporaryDirectory(prefix="loaderlab-ex14-") as scratch):
        shards = _shard_bytes(storage)
        keys = list(storage.split(SPLIT).shard_keys[:SAME_TIME_SHARDS])
        budget = 2 * sum(len(shards[key]) for key in keys)
        cache = _cache(ex, storage, Path(scratch) / "cache", budget)
        storage.network.reset()
        what = (f"{SAME_TIME_THREADS} threads asking ShardCache for the same {SAME_TIME_SHARDS} shards at once "
                f"({SAME_TIME_LATENCY_S * 1000:g} ms per request), budget_bytes={budget:,}")
        failures: list[str] = []
        parts = [keys[i % len(keys):] + keys[:i % len(keys)] for i in range(SAME_TIME_THREADS)]
        with no_leaks(what):
            within(120, what, lambda: _run_threads(cache, parts, shards, what, failures,
                                                   threading.Barrier(SAME_TIME_THREADS)))
        assert not failures, failures[0]
        gets = {key: _gets_of(storage.stats(), storage.bucket, key) for key in keys}
        assert all(count == 1 for count in gets.values()), (
            f"{what}: the proxy saw {gets} GETs per shard: a shard that several threads miss at once must be fetched "
            "once; the others wait for that download (a Future or an Event per shard being fetched), then read it.")


def _access_order(rng: random.Random, keys: Sequence[str]) -> list[str]:
    """An epoch's shard accesses: half the time one of the last three shards again (locality), else any shard."""
    order: list[str] = []
    while len(order) < LRU_ACCESSES:
        recent = list(dict.fromkeys(reversed(order)))[:3]
        order.append(rng.choice(recent) if recent and rng.random() < 0.5 else rng.choice(list(keys)))
    return order


def lru_misses(order: Sequence[str], sizes: dict[str, int], budget: int,
               cached: OrderedDict[str, int] | None = None) -> tuple[Counter[str], OrderedDict[str, int]]:
    """A least-recently-used cache of `budget` bytes over `order`: the misses per key, and what it holds after."""
    cached = OrderedDict() if cached is None else cached
    misses: Counter[str] = Counter()
    for key in order:
        if key in cached:
            cached.move_to_end(key)
            continue
        misses[key] += 1
        while cached and sum(cached.values()) + sizes[key] > budget:
            cached.popitem(last=False)
        cached[key] = sizes[key]
    return misses, cached


def second_epoch_hits_match_lru(ex: ModuleType) -> None:
    with storage_session() as storage, tempfile.TemporaryDirectory(prefix="loaderlab-ex14-") as scratch:
        shards = _shard_bytes(storage)
        sizes = {key: len(data) for key, data in shards.items()}
        budget = int(LRU_BUDGET_SHARDS * sum(sizes.values()) / len(sizes))
        rng = random.Random(19)
        epochs = [_access_order(rng, list(shards)) for _ in range(2)]
        cache = _cache(ex, storage, Path(scratch) / "cache", budget)
        what = f"ShardCache(budget_bytes={budget:,}), {LRU_ACCESSES} gets an epoch, from one thread"
        for key in epochs[0]:
            _get(cache, key, shards, f"{what}, epoch 1")
        storage.network.reset()
        for key in epochs[1]:
            _get(cache, key, shards, f"{what}, epoch 2")
        first, held = lru_misses(epochs[0], sizes, budget)
        expected, _ = lru_misses(epochs[1], sizes, budget, held)
        stats = storage.stats()
        got = Counter({key: n for key in shards if (n := _gets_of(stats, storage.bucket, key))})
        differ = sorted(key for key in set(got) | set(expected) if got[key] != expected[key])
        hit_rate = 1 - sum(got.values()) / len(epochs[1])
        expected_rate = 1 - sum(expected.values()) / len(epochs[1])
        assert got == expected, (
            f"{what}: epoch 2's hit rate was {hit_rate:.0%} ({sum(got.values())} GETs), where a least-recently-used "
            f"cache of the same budget over the same gets has {expected_rate:.0%} ({sum(expected.values())} misses); "
            f"shards fetched other than it: {differ[:4]}. "
            "A hit marks the shard as just used; room is made by removing the least recently used first, only as "
            "many as the new shard needs.")


# ---- step 5: bad input -----------------------------------------------------------------------------------------------

def store_errors_name_what_and_where(ex: ModuleType) -> None:
    object_samples, shard_samples = require(ex, "object_samples"), require(ex, "shard_samples")
    fetch_in_flight, shard_index, shard_cache = (require(ex, name) for name in
                                                 ("fetch_in_flight", "ShardIndex", "ShardCache"))
    with storage_session() as storage, tempfile.TemporaryDirectory(prefix="loaderlab-ex14-") as scratch:
        direct, bucket, train = storage.server, storage.bucket, storage.split(SPLIT)
        first, shard = train.samples[0], train.shard_keys[0]
        wrong_secret = Endpoint(direct.url, direct.access_key, direct.secret_key[::-1], direct.region)
        nowhere = direct.through(f"http://127.0.0.1:{closed_port()}")
        missing_bucket, missing_key = "ex14-no-such-bucket", "images-0/train/no-such-class/no-such-file.jpg"
        missing_shard = "shards/train/shard-99999.tar"
        cases = (
            ("ShardIndex with a wrong secret key", lambda: shard_index(wrong_secret, bucket, train.index_key),
             (train.index_key, direct.url)),
            ("shard_samples from a bucket that does not exist",
             lambda: list(shard_samples(direct, missing_bucket, [shard])), (missing_bucket, direct.url)),
            ("fetch_in_flight over a key that does not exist",
             lambda: list(fetch_in_flight(direct, bucket, [first.object_key, missing_key], 2)),
             (missing_key, direct.url)),
            ("ShardCache.get of a shard that does not exist",
             lambda: shard_cache(direct, bucket, Path(scratch) / "cache", 10**8).get(missing_shard),
             (missing_shard, direct.url)),
            (f"object_samples from {nowhere.url}, where no server runs",
             lambda: list(object_samples(nowhere, bucket, [(first.object_key, first.label)])),
             (first.object_key, nowhere.url)),
        )
        for what, run, names in cases:
            expect_error(run, what, names, "bad input must fail loudly, never give an empty epoch.", ERROR_TIMEOUT_S)


def _boundary_cuts(shard: bytes, sample: str) -> list[tuple[int, str]]:
    """Where to cut a shard at a member's boundary: after `sample` whole, between its image and its label, and after
    the last member (the end-of-archive blocks gone): (bytes kept, where)."""
    with tarfile.open(fileobj=io.BytesIO(shard)) as tar:
        ends = {member.name: member.offset_data + -(-member.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
                for member in tar.getmembers()}
    label = f"{sample}.cls"
    image = next(name for name in ends if name.startswith(f"{sample}.") and name != label)
    return [(ends[label], f"at a member's boundary, after sample {sample!r} whole"),
            (ends[image], f"at a member's boundary, between sample {sample!r}'s image and its label"),
            (max(ends.values()), "after its last member, without the two zero blocks that end a tar")]


def broken_data_errors_name_where(ex: ModuleType) -> None:
    shard_samples, shard_index = require(ex, "shard_samples"), require(ex, "ShardIndex")
    with storage_session() as storage:
        direct, train = storage.server, storage.split(SPLIT)
        client = direct.client()
        scratch = SCRATCH_BUCKET.format(pid=os.getpid())
        client.create_bucket(Bucket=scratch)
        try:
            cut_shard, short_shard = train.shard_keys[0], train.shard_keys[1]
            middle = train.samples_of(cut_shard)[len(train.samples_of(cut_shard)) // 2]
            data = stored_bytes(storage, cut_shard)
            client.put_object(Bucket=scratch, Key=cut_shard, Body=data[:middle.offset + middle.size // 2])
            short = stored_bytes(storage, short_shard)
            client.put_object(Bucket=scratch, Key=short_shard, Body=short)
            past = train.samples_of(short_shard)[0]
            document = json.loads(stored_bytes(storage, train.index_key))
            row = next(row for row in document["samples"] if row["key"] == past.key)
            row["offset"] = len(short) - past.size // 2     # its bytes run past the shard's end
            client.put_object(Bucket=scratch, Key=train.index_key, Body=json.dumps(document).encode())
            expect_error(lambda: list(shard_samples(direct, scratch, [cut_shard])),
                         f"shard_samples over {cut_shard!r} cut in the middle of a sample", (cut_shard,),
                         "a shard cut short must raise an error naming it (tarfile raises ReadError: do not catch "
                         "it silently): a silently short epoch trains on less data than you think.", ERROR_TIMEOUT_S)
            for cut, where in _boundary_cuts(data, middle.key):
                client.put_object(Bucket=scratch, Key=cut_shard, Body=data[:cut])
                expect_error(lambda: list(shard_samples(direct, scratch, [cut_shard])),
                             f"shard_samples over {cut_shard!r} cut {where} (its first {cut:,} of {len(data):,} "
                             "bytes)", (cut_shard,),
                             "the epoch ended short in silence. A shard cut short must raise an error naming it, "
                             "wherever the cut falls.", ERROR_TIMEOUT_S)
            index = within(60, "ShardIndex over an index with an entry past its shard's end",
                           lambda: shard_index(direct, scratch, train.index_key))
            expect_error(lambda: index.read([past.key]),
                         f"ShardIndex.read([{past.key!r}]), whose index entry runs past the end of {short_shard!r}",
                         (past.key, short_shard),
                         "a Range past the object's end is answered with fewer bytes (206, a shorter "
                         "Content-Range): compare what came with the size the index gives.", ERROR_TIMEOUT_S)
        finally:
            keys = [entry["Key"] for entry in client.list_objects_v2(Bucket=scratch).get("Contents", [])]
            for key in keys:
                client.delete_object(Bucket=scratch, Key=key)
            client.delete_bucket(Bucket=scratch)


def failures_past_every_attempt_raise(ex: ModuleType) -> None:
    object_samples, shard_samples = require(ex, "object_samples"), require(ex, "shard_samples")
    fetch_in_flight = require(ex, "fetch_in_flight")
    with storage_session() as storage:
        bucket, train = storage.bucket, storage.split(SPLIT)
        index = _index(ex, storage, "ShardIndex(endpoint, bucket, index_key)", train)   # read while the network works
        shard = train.shard_keys[0]
        samples = train.samples_of(shard)[:3]
        objects = [(sample.object_key, sample.label) for sample in samples]
        storage.network.use(BROKEN_BODIES)
        cases = (
            (f"object_samples over {len(objects)} objects", lambda: object_samples(storage.endpoint, bucket,
                                                                                   objects), len(objects)),
            (f"shard_samples over {shard!r}", lambda: shard_samples(storage.endpoint, bucket, [shard]),
             len(train.samples_of(shard))),
            (f"fetch_in_flight(in_flight=2) over {len(objects)} objects",
             lambda: fetch_in_flight(storage.endpoint, bucket, [key for key, _ in objects], 2), len(objects)),
            (f"ShardIndex.read of {len(samples)} neighbours", lambda: index.read([s.key for s in samples]),
             len(samples)),
        )
        for what, run, count in cases:
            what = f"{what}, while every answer's body breaks off (each attempt of each GET fails)"
            try:
                got = within(ERROR_TIMEOUT_S, what, lambda: _take(run(), what, ERROR_TIMEOUT_S))
            except (AssertionError, NotImplementedError):
                raise
            except Exception:
                continue
            assert len(got) == count, (
                f"{what}: returned {len(got)} of {count} items and no error: a failure that persists past every "
                "attempt must raise, never leave a sample silently out.")
