"""loaderlab.lessons.m10_storage, what notebook 10 measures with it, the claims its text makes about the pinned
clients, the notebook's shape and quiz 10."""

from __future__ import annotations

import importlib.resources
import json
import random
import re
import uuid
from dataclasses import replace

import pytest

from grader import quiz
from loaderlab.lessons import m10_storage as m10
from loaderlab.lessons.m10_storage import Ceilings, Get
from loaderlab.paths import REPO_ROOT
from loaderlab.storage.bucket import StoredSample

NOTEBOOK = REPO_ROOT / "notebooks" / "10_object_storage.ipynb"


# ---- the model ----------------------------------------------------------------------------------------------------

def test_one_request_is_the_latency_then_the_body_at_the_connections_bandwidth() -> None:
    assert m10.request_seconds(1e6, 0.05, 50e6) == pytest.approx(0.07)
    assert m10.request_seconds(1e6, 0.05, None) == 0.05


def test_in_flight_model_takes_the_least_limit_and_names_it() -> None:
    ceilings = Ceilings(latency_s=0.05, connection_bytes_per_s=50e6, total_bytes_per_s=200e6, prefix_gets_per_s=150,
                        prefixes=4, client_gets_per_s=500)
    per_request = m10.request_seconds(100e3, 0.05, 50e6)
    assert m10.in_flight_model(1, 100e3, ceilings) == (pytest.approx(1 / per_request), "1 in flight")
    assert m10.in_flight_model(64, 100e3, ceilings) == (500, "client CPU")
    assert m10.in_flight_model(64, 100e3, replace(ceilings, client_gets_per_s=None)) == (600, "4 prefix(es)")
    assert m10.in_flight_model(64, 4e6, ceilings) == (pytest.approx(50), "total bandwidth")
    assert m10.in_flight_model(10**6, 100e3, Ceilings(0.05, None))[1] == f"{10**6} in flight"


def test_the_prefix_limit_binds_only_a_run_that_puts_more_on_a_prefix_than_one_window_admits() -> None:
    """A 1-s window of 150 GET/s admits 150 per prefix in any second: 128 GETs over 4 prefixes are never refused."""
    ceilings = Ceilings(latency_s=0.05, connection_bytes_per_s=50e6, prefix_gets_per_s=150, prefixes=4)
    assert m10.in_flight_model(64, 100e3, ceilings)[1] == "4 prefix(es)"
    assert m10.in_flight_model(64, 100e3, ceilings, requests=601)[1] == "4 prefix(es)"
    short = m10.in_flight_model(64, 100e3, ceilings, requests=600)
    assert short == (pytest.approx(64 / m10.request_seconds(100e3, 0.05, 50e6)), "64 in flight")


def test_littles_law_gives_the_requests_that_fill_the_bandwidth_and_the_product_is_bytes_whatever_the_size() -> None:
    ceilings = Ceilings(latency_s=0.05, connection_bytes_per_s=50e6, total_bytes_per_s=200e6)
    n = m10.in_flight_to_fill(100e3, ceilings)
    assert n == pytest.approx(200e6 * 0.052 / 100e3)
    assert m10.in_flight_to_fill(2.5e6, ceilings) == pytest.approx(200e6 * 0.1 / 2.5e6)
    assert m10.bandwidth_delay_bytes(ceilings) == pytest.approx(10e6)
    unbounded = replace(ceilings, total_bytes_per_s=None)
    assert m10.in_flight_to_fill(100e3, unbounded) == float("inf") == m10.bandwidth_delay_bytes(unbounded)
    assert m10.in_flight_model(round(n), 100e3, unbounded)[0] == pytest.approx(200e6 / 100e3, rel=0.01)


def test_batch_model_is_bounded_by_the_longest_request_the_shared_time_and_the_total_bandwidth() -> None:
    ceilings = Ceilings(latency_s=0.05, connection_bytes_per_s=50e6, total_bytes_per_s=100e6)
    assert m10.batch_model_seconds([1e6] * 8, 8, ceilings) == pytest.approx(0.08)        # 8 bytes / total
    assert m10.batch_model_seconds([1e6] * 8, 2, ceilings) == pytest.approx(4 * 0.07)    # 4 rounds
    assert m10.batch_model_seconds([10e6, 1e3], 8, ceilings) == pytest.approx(0.25)       # the longest


# ---- coalescing ---------------------------------------------------------------------------------------------------

def entry(shard: str, offset: int, size: int = 100) -> StoredSample:
    return StoredSample(f"{shard}-{offset}", 0, f"images-0/{shard}-{offset}.jpg", shard, offset, size)


def test_coalesce_merges_neighbours_within_the_gap_and_never_across_shards() -> None:
    wanted = [entry("b", 0), entry("a", 1000), entry("a", 0), entry("a", 150), entry("b", 120)]
    assert [(s.shard, s.start, s.end, len(s.members)) for s in m10.coalesce(wanted, 0)] == [
        ("a", 0, 100, 1), ("a", 150, 250, 1), ("a", 1000, 1100, 1), ("b", 0, 100, 1), ("b", 120, 220, 1)]
    assert [(s.shard, s.start, s.end) for s in m10.coalesce(wanted, 50)] == [
        ("a", 0, 250), ("a", 1000, 1100), ("b", 0, 220)]
    assert [(s.shard, s.start, s.end) for s in m10.coalesce(wanted, 10**6)] == [("a", 0, 1100), ("b", 0, 220)]
    merged = m10.coalesce(wanted, 10**6)
    assert sorted(m.key for s in merged for m in s.members) == sorted(e.key for e in wanted)
    assert all(s.start <= m.offset and m.offset + m.size <= s.end for s in merged for m in s.members)


# ---- the cache and its simulation -----------------------------------------------------------------------------------

def test_shard_cache_matches_the_simulation_and_never_holds_more_than_its_budget(tmp_path) -> None:
    rng = random.Random(3)
    sizes = {f"shards/s{i}.tar": rng.randint(1000, 5000) for i in range(9)}
    accesses = [rng.choice(list(sizes)) for _ in range(200)]
    fetched: list[str] = []
    budget = 12_000
    cache = m10.ShardCache(tmp_path / "cache", budget, lambda shard: fetched.append(shard) or b"x" * sizes[shard])
    hits = []
    for shard in accesses:
        before = cache.hits
        path = cache.path(shard)
        hits.append(cache.hits > before)
        assert path.stat().st_size == sizes[shard]
        assert sum(p.stat().st_size for p in cache.folder.iterdir()) <= budget
    assert hits == m10.simulate_lru(accesses, sizes, budget)
    assert len(fetched) == cache.misses == hits.count(False)
    with pytest.raises(ValueError, match="more than the cache's whole budget"):
        m10.ShardCache(tmp_path / "small", 10, lambda shard: b"x" * 11).path("big")


def test_least_recently_used_never_hits_a_repeated_order_larger_than_its_budget() -> None:
    shards = [f"s{i}" for i in range(8)]
    sizes = dict.fromkeys(shards, 1)
    epochs = m10.shard_order(shards, 2, "same")
    assert sum(m10.simulate_lru(epochs[0] + epochs[1], sizes, 4)[8:]) == 0
    alternate = m10.shard_order(shards, 2, "alternate")
    assert sum(m10.simulate_lru(alternate[0] + alternate[1], sizes, 4)[8:]) == 4
    assert sum(m10.simulate_lru(epochs[0] + epochs[1], sizes, 8)[8:]) == 8


def test_shard_orders_are_permutations_drawn_from_seed_and_epoch() -> None:
    shards = [f"s{i}" for i in range(10)]
    shuffled = m10.shard_order(shards, 3, "shuffled", seed=1)
    assert all(sorted(epoch) == shards for epoch in shuffled) and len({tuple(e) for e in shuffled}) == 3
    assert m10.shard_order(shards, 3, "shuffled", seed=1) == shuffled
    assert m10.shard_order(shards, 2, "alternate")[1] == shards[::-1]
    with pytest.raises(ValueError, match="how must be"):
        m10.shard_order(shards, 2, "random")


# ---- prices and the job on paper -----------------------------------------------------------------------------------

def test_s3_standard_prices_a_list_at_12_5_gets_and_names_its_source_and_date() -> None:
    assert m10.S3_STANDARD.requests(gets=1000) == pytest.approx(0.0004)
    assert m10.S3_STANDARD.list_per_1000 / m10.S3_STANDARD.get_per_1000 == pytest.approx(12.5)
    assert "aws.amazon.com/s3/pricing" in m10.S3_STANDARD.source and re.search(r"\d{4}-\d\d-\d\d", m10.S3_STANDARD.source)


def test_the_paper_job_needs_a_get_per_image_or_a_few_per_shard() -> None:
    job = m10.PaperJob(images_per_s=24_000, image_bytes=110e3, dataset_images=1_281_167, latency_s=0.03,
                       connection_bytes_per_s=90e6, prefix_gets_per_s=5_500)
    per_image, per_shard = job.row(110e3), job.row(64e6)
    assert per_image["gets_per_s"] == pytest.approx(24_000) and per_image["prefixes"] == pytest.approx(4.36, abs=0.01)
    assert per_image["connections"] == pytest.approx(24_000 * (0.03 + 110e3 / 90e6))
    assert per_image["dollars_per_epoch"] == pytest.approx(1_281_167 * 0.0004 / 1000)
    assert per_shard["gets_per_s"] == pytest.approx(2.64e9 / 64e6) and per_shard["connections"] < 35
    assert job.epoch_seconds == pytest.approx(1_281_167 / 24_000)
    assert job.epoch_bytes == pytest.approx(1_281_167 * 110e3)
    # the GETs of a per-object epoch cost what 8 GPUs cost for that epoch at about $4.32 an hour
    assert job.break_even_gpu_hour(per_image["dollars_per_epoch"], 8) == pytest.approx(4.32, abs=0.01)


def test_transfer_prices_are_free_in_the_region_and_name_their_source_and_date() -> None:
    cost = m10.S3_TRANSFER.dollars(100)
    assert cost == {"same Region": 0.0, "cross-Region": pytest.approx(2.0), "internet": pytest.approx(9.0),
                    "NAT gateway processing": pytest.approx(4.5)}
    assert "aws.amazon.com/vpc/pricing" in m10.S3_TRANSFER.source and "unverified" in m10.S3_TRANSFER.source
    assert re.search(r"\d{4}-\d\d-\d\d", m10.S3_TRANSFER.source)


# ---- what the notebook says about the pinned clients ----------------------------------------------------------------

@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9", "http://storage.example:9"])
def test_botocore_addresses_an_endpoint_given_by_ip_or_hostname_path_style_unasked(endpoint: str) -> None:
    """Notebook 10, section 8: MosaicML Streaming's downloader passes only endpoint_url; path style follows anyway,
    for an IP and for a hostname."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="a", aws_secret_access_key="b",
                          region_name="us-east-1")
    seen = {}

    class Sent(Exception):
        pass

    def capture(request, **_):
        seen["url"] = request.url
        raise Sent

    client.meta.events.register("before-send.s3.GetObject", capture)
    with pytest.raises(Sent):
        client.get_object(Bucket="a-bucket", Key="a/key")
    assert seen["url"] == f"{endpoint}/a-bucket/a/key"


def test_obstore_coalesces_ranges_under_one_mib_and_refuses_non_partial_answers_by_its_documentation() -> None:
    stub = (importlib.resources.files("obstore") / "_get.pyi").read_text()
    assert "coalesce: int = 1024 * 1024" in stub and "maximum of 10" in stub
    aws = (importlib.resources.files("obstore") / "_store" / "_aws.pyi").read_text()
    assert re.search(r"`False` \(default\):\s+Path style request is used", aws)


# ---- against the real server ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(s3_server):
    """The run's S3 server (or this session's own: the s3_server fixture), a bucket of three objects, and the proxy
    in front of it."""
    from loaderlab.storage.netem import emulated_network
    from loaderlab.storage.server import shared_server

    with shared_server() as endpoint:
        bucket = f"test-m10-{uuid.uuid4().hex[:8]}"
        client = endpoint.client()
        client.create_bucket(Bucket=bucket)
        bodies = {f"p{i}/object-{i}": bytes(range(256)) * (40 * (i + 1)) for i in range(3)}
        for key, body in bodies.items():
            client.put_object(Bucket=bucket, Key=key, Body=body)
        try:
            with emulated_network(endpoint) as network:
                yield endpoint, network, bucket, bodies
        finally:
            for key in bodies:
                client.delete_object(Bucket=bucket, Key=key)
            client.delete_bucket(Bucket=bucket)


def test_fetch_all_keeps_the_order_asked_and_ranges_come_back_exact(served) -> None:
    endpoint, network, bucket, bodies = served
    client = endpoint.through(network.url).client(max_pool_connections=4)
    keys = list(bodies)[::-1]
    fetched = m10.fetch_all(client, bucket, [Get(k) for k in keys] + [Get(keys[0], 100, 50)], 4)
    assert fetched.bodies == [bodies[k] for k in keys] + [bodies[keys[0]][100:150]]


def test_a_ranged_get_answered_200_is_refused_loudly(served) -> None:
    endpoint, network, bucket, bodies = served
    client = endpoint.through(network.url).client()
    key = next(iter(bodies))
    from loaderlab.storage.netem import PROFILES

    network.use(replace(PROFILES["loopback"], ignore_range=True))
    try:
        with pytest.raises(m10.NotPartialContent, match="answered 200.*not 206"):
            m10.get_bytes(client, bucket, Get(key, 10, 20))
    finally:
        network.use("loopback")
    assert m10.get_bytes(client, bucket, Get(key, 10, 20)) == bodies[key][10:30]


def test_obstore_coalesces_near_ranges_into_one_get_and_refuses_a_whole_object_answer(served) -> None:
    """Notebook 10, sections 5 and 8: obstore's get_ranges merges ranges under 1 MiB apart, and it refuses an answer
    that is not partial (measured here through the proxy's ignore_range, not only read in its documentation)."""
    import obstore
    from obstore.store import S3Store

    from loaderlab.storage.netem import PROFILES

    endpoint, network, bucket, bodies = served
    key = next(iter(bodies))
    store = S3Store(bucket, endpoint=network.url, access_key_id=endpoint.access_key,
                    secret_access_key=endpoint.secret_key, region=endpoint.region, client_options={"allow_http": True})
    network.reset()
    got = obstore.get_ranges(store, key, starts=[0, 100, 5000], lengths=[10, 10, 10])
    assert [bytes(b) for b in got] == [bodies[key][s:s + 10] for s in (0, 100, 5000)]
    assert network.stats().range_gets == 1
    network.use(replace(PROFILES["loopback"], ignore_range=True))
    try:
        with pytest.raises(Exception, match="non-partial"):
            obstore.get_range(store, key, start=10, length=5)
    finally:
        network.use("loopback")


def test_list_keys_pages_and_read_by_ranges_gets_every_sample(served) -> None:
    endpoint, network, bucket, bodies = served
    client = endpoint.through(network.url).client()
    network.reset()
    listing = m10.list_keys(client, bucket, "p", page_keys=2)
    assert listing.sizes == {k: len(v) for k, v in bodies.items()} and listing.pages == 2
    assert network.stats().lists == 2
    key = next(iter(bodies))
    wanted = [StoredSample(f"s{i}", 0, f"images-0/s{i}.jpg", key, offset, 100) for i, offset in enumerate((0, 150, 5000))]
    read = m10.read_by_ranges(client, bucket, wanted, max_gap=100, in_flight=2)
    assert read.requests == 2 and read.samples == {e.key: bodies[key][e.offset:e.offset + 100] for e in wanted}
    assert read.over_fetch == pytest.approx(50 / 300)


def test_read_index_reads_the_split_the_bucket_layout_writes(served) -> None:
    from loaderlab.storage.bucket import index_key

    endpoint, network, bucket, _ = served
    client = endpoint.client()
    document = {"shards": [{"key": "shards/val/shard-00000.tar", "bytes": 3000, "samples": 1}],
                "samples": [{"key": "circles/x", "label": 3, "object": "images-0/val/circles/x.jpg",
                             "shard": "shards/val/shard-00000.tar", "offset": 512, "size": 9}]}
    client.put_object(Bucket=bucket, Key=index_key("val"), Body=json.dumps(document).encode())
    try:
        split = m10.read_index(client, bucket, "val")
    finally:
        client.delete_object(Bucket=bucket, Key=index_key("val"))
    assert split.samples == (StoredSample("circles/x", 3, "images-0/val/circles/x.jpg", "shards/val/shard-00000.tar",
                                          512, 9),)
    assert split.shard_keys == ("shards/val/shard-00000.tar",)


def test_the_lab_stops_its_proxy_and_removes_its_work_folder_on_close(served, monkeypatch) -> None:
    """What notebook 10's first cell starts (its StorageSession: the server, the data, the proxy), its last cell stops
    (and the interpreter's exit, through atexit). The server is the run's, announced as `make storage` or the test
    session announces it (one server per data folder)."""
    import urllib.error
    import urllib.request

    for name, value in served[0].env().items():
        monkeypatch.setenv(name, value)
    registered = []
    monkeypatch.setattr(m10.atexit, "register", registered.append)
    lab = m10.start_lab("ci", "loopback")
    try:
        assert registered == [lab.close] and lab.work.is_dir()
        assert lab.network.stats().requests == 0
        assert lab.endpoint.url == lab.network.url != lab.server.url, "lab.endpoint: the server through the proxy"
        assert lab.split("train").samples and lab.bucket == lab.dataset.bucket
        assert m10.read_index(lab.client(), lab.bucket, "train").samples
    finally:
        lab.close()
    assert not lab.work.exists()
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"{lab.network.url}/__netem/stats", timeout=5)
    lab.close()  # a second close (the atexit one, after the last cell's) does nothing


# ---- part 2: when the network fails ---------------------------------------------------------------------------------

def test_botocore_retries_503_and_slowdown_inside_the_call_with_the_backoff_the_notebook_quotes() -> None:
    """Notebook 10, section 10: what standard mode retries, its waits, and why a cut body escapes it."""
    from botocore.exceptions import HTTPClientError, ResponseStreamingError
    from botocore.retries import standard, throttling

    assert {500, 502, 503, 504} == set(standard.TransientRetryableChecker._TRANSIENT_STATUS_CODES)
    assert "SlowDown" in standard.ThrottledRetryableChecker._THROTTLED_ERROR_CODES
    assert standard.DEFAULT_MAX_ATTEMPTS == 3 and standard.ExponentialBackoff._MAX_BACKOFF == 20
    assert standard.ExponentialBackoff._DEFAULT_BACKOFF_CONFIG == {"throttling_base_scale": 1,
                                                                   "non_throttling_base_scale": 0.05}
    assert issubclass(ResponseStreamingError, HTTPClientError)
    assert hasattr(throttling, "CubicCalculator")  # section 12: the adaptive mode's rate


def test_webdataset_opens_http_with_the_curl_arguments_and_splits_shards_as_the_notebook_says(monkeypatch) -> None:
    """Notebook 10, sections 11 and 13: gopen_curl's command line, and split_by_node's shards[rank::world_size]."""
    import importlib

    gopen = importlib.import_module("webdataset.gopen")   # the module: the package exports a function of its name
    shardlists = importlib.import_module("webdataset.shardlists")
    seen = []
    monkeypatch.setattr(gopen, "Pipe", lambda *args, **kwargs: seen.append(args))
    gopen.gopen_curl("http://host/shard.tar")
    assert seen == [(["curl", "--connect-timeout", "30", "--retry", "30", "--retry-delay", "2", "-f", "-s", "-L",
                      "http://host/shard.tar"],)]
    monkeypatch.setattr(shardlists.utils, "pytorch_worker_info", lambda group=None: (1, 3, 0, 1))
    shards = [[f"s{i}-a", f"s{i}-b"] for i in range(5)]
    assert list(shardlists.split_by_node(shards)) == shards[1::3]
    assert m10.split_by_shard(shards, 1, 3) == [sample for shard in shards[1::3] for sample in shard]


def test_splitting_by_shard_leaves_a_rank_empty_and_padding_evens_the_ranks_out() -> None:
    two_shards = [[f"a{i}" for i in range(16)], [f"b{i}" for i in range(16)]]
    assert [len(m10.split_by_shard(two_shards, rank, 3)) for rank in range(3)] == [16, 16, 0]
    for sizes, world_size in (([16, 16], 3), ([5, 7, 1], 4), ([3], 5), ([8, 8], 2), ([1], 3)):
        shards = [[f"{n}-{i}" for i in range(size)] for n, size in enumerate(sizes)]
        everything = [s for shard in shards for s in shard]
        shares = [m10.split_padded(shards, rank, world_size) for rank in range(world_size)]
        assert len({len(share) for share in shares}) == 1, (sizes, world_size, shares)
        seen = [s for share in shares for s in share]
        assert set(seen) == set(everything)
        assert len(seen) - len(everything) == -len(everything) % world_size or len(everything) < world_size
    assert m10.split_padded([], 0, 3) == []


def test_a_state_frozen_after_a_resume_sends_the_second_resume_back_to_the_start() -> None:
    """Notebook 10, section 14 (huggingface/datasets#8308): one resume passes either way, the second does not."""
    keys = [f"k{i}" for i in range(200)]
    for counts_in_epoch in (False, True):
        once = m10.run_with_kills(lambda: m10.ResumableStream(keys, counts_in_epoch), [70])
        assert once == keys
    frozen = m10.run_with_kills(lambda: m10.ResumableStream(keys, False), [70, 50])
    assert frozen == keys[:120] + keys and frozen[120] == keys[0]
    assert m10.run_with_kills(lambda: m10.ResumableStream(keys, True), [70, 50, 30]) == keys


def test_retrying_at_once_resends_only_slowdowns_up_to_its_attempts() -> None:
    from botocore.exceptions import ClientError

    class Client:
        def __init__(self, refusals: int, code: str = "SlowDown") -> None:
            self.refusals, self.code, self.calls = refusals, code, 0

        def get_object(self, Bucket: str, Key: str) -> dict:
            self.calls += 1
            if self.calls <= self.refusals:
                raise ClientError({"Error": {"Code": self.code, "Message": "m"}}, "GetObject")
            return {"Body": __import__("io").BytesIO(b"data")}

    client = Client(3)
    assert m10.read_retrying_at_once(client, "b", "k", max_attempts=4) == (b"data", ()) and client.calls == 4
    with pytest.raises(ClientError, match="SlowDown"):
        m10.read_retrying_at_once(Client(4), "b", "k", max_attempts=4)
    denied = Client(1, "AccessDenied")
    with pytest.raises(ClientError, match="AccessDenied"):
        m10.read_retrying_at_once(denied, "b", "k", max_attempts=4)
    assert denied.calls == 1
    with pytest.raises(ValueError, match="at least 1"):
        m10.read_retrying_at_once(Client(0), "b", "k", max_attempts=0)
    delivery = m10.deliver(Client(10**6), "b", ["k1", "k2"], 2,
                           lambda c, b, k: m10.read_retrying_at_once(c, b, k, max_attempts=2))
    assert delivery.bodies == {} and delivery.failures == {"ClientError (SlowDown)": 2}
    assert "SlowDown" in delivery.messages["ClientError (SlowDown)"]


def test_deliver_stops_starting_reads_after_its_time() -> None:
    import time

    def slow(client, bucket, key):
        time.sleep(0.05)
        return key.encode(), ()

    keys = [f"k{i}" for i in range(40)]
    assert sorted(m10.deliver(None, "b", keys, 2, slow).bodies) == sorted(keys)
    stopped = m10.deliver(None, "b", keys, 2, slow, stop_after_s=0.12)
    assert 2 <= len(stopped.bodies) <= 10 and not stopped.failures
    assert set(stopped.bodies) == set(keys[:len(stopped.bodies)])   # the first ones, started in order


def test_drain_returns_what_arrived_and_the_error_that_stopped_it() -> None:
    def broken():
        yield 1
        yield 2
        raise OSError("cut")

    received, error = m10.drain(broken())
    assert received == [1, 2] and isinstance(error, OSError)
    assert m10.drain(iter([3])) == ([3], None)


def test_a_body_cut_after_its_headers_escapes_standard_retries_and_read_resuming_delivers_it_exactly(served) -> None:
    """Notebook 10, section 10, against the real server: every body cut (p_drop = 1) until a range of one byte."""
    from botocore.exceptions import ResponseStreamingError

    from loaderlab.storage.netem import PROFILES

    endpoint, network, bucket, bodies = served
    client = endpoint.through(network.url).client(retries={"mode": "standard", "max_attempts": 3})
    key, body = max(bodies.items(), key=lambda item: len(item[1]))
    network.use(replace(PROFILES["loopback"], name="every body cut", p_drop=1.0))
    try:
        with pytest.raises(ResponseStreamingError, match="IncompleteRead"):
            m10.read_plain(client, bucket, key)
        network.reset()
        data, resumed_from = m10.read_resuming(client, bucket, key, max_resumes=len(body))
        stats = network.stats()
        assert data == body and resumed_from and list(resumed_from) == sorted(set(resumed_from))
        assert stats.bytes_sent == len(body) and stats.gets == 1 + len(resumed_from)
        with pytest.raises(m10.BodyCutShort, match=f"GET {bucket}/{key}: the body stopped short 1 times"):
            m10.read_resuming(client, bucket, key, max_resumes=0)
    finally:
        network.use("loopback")


def test_the_managed_download_fetches_a_cut_body_again_from_its_start_five_times(served) -> None:
    """Notebook 10, section 10: boto3's download_fileobj (s3transfer) retries a body cut after its headers."""
    from s3transfer.exceptions import RetriesExceededError

    from loaderlab.storage.netem import PROFILES

    endpoint, network, bucket, bodies = served
    client = endpoint.through(network.url).client(retries={"mode": "standard", "max_attempts": 3})
    key, body = max(bodies.items(), key=lambda item: len(item[1]))
    assert m10.read_managed(client, bucket, key) == (body, ())
    network.use(replace(PROFILES["loopback"], name="every body cut", p_drop=1.0))
    try:
        network.reset()
        with pytest.raises(RetriesExceededError):
            m10.read_managed(client, bucket, key)
        stats = network.stats()
        # each attempt asks for the whole object again, from byte 0 (where each is cut is drawn from the request,
        # whose path holds the session's bucket name: how many bytes five cuts sent differs from run to run)
        assert stats.gets == stats.drops == 5 and stats.range_gets == 0, stats
        assert [event.byte_range for event in network.timeline() if event.is_get] == [""] * 5
    finally:
        network.use("loopback")


# ---- ranges, indexes, credentials and stalls (notebook 10, sections 5b, 5c, 8b and 16) -----------------------------------

def test_the_server_answers_ranges_past_the_end_multi_ranges_and_a_wrong_if_match_as_the_notebook_says(served) -> None:
    endpoint, network, bucket, bodies = served
    client = endpoint.through(network.url).client()
    key, body = next(iter(bodies.items()))
    size, etag = len(body), client.head_object(Bucket=bucket, Key=key)["ETag"]
    def answer(byte_range: str, match: str | None = None) -> tuple[int, str, int, str]:
        got = m10.range_answer(client, bucket, key, byte_range, match)
        return got.status, got.content_range, got.body_bytes, got.error_code

    assert m10.range_answer(client, bucket, key, "bytes=10-19") == m10.RangeAnswer(
        "bytes=10-19", 206, f"bytes 10-19/{size}", 10, "")
    assert answer(f"bytes={size - 10}-{size + 9}") == (206, f"bytes {size - 10}-{size - 1}/{size}", 10, "")
    assert answer(f"bytes={size + 5}-{size + 9}") == (416, "", 0, "InvalidRange")
    assert answer("bytes=0-9,20-29") == (200, "", size, "")
    assert answer("bytes=0-9", '"' + "0" * 32 + '"') == (412, "", 0, "PreconditionFailed")
    assert answer("bytes=0-9", etag)[:2] == (206, f"bytes 0-9/{size}")
    with pytest.raises(m10.NotPartialContent, match=f"bytes {size - 10}-{size - 1}/{size}"):
        m10.get_bytes(client, bucket, Get(key, size - 10, 20))


def test_a_shard_table_holds_offset_size_and_label_in_twelve_bytes_a_sample() -> None:
    samples = [StoredSample(f"k{i}", i % 3, f"images-0/k{i}.jpg", "s.tar", 512 + 2048 * i, 1000 + i) for i in range(5)]
    table = m10.shard_table(samples)
    assert len(table) == 4 + 12 * len(samples) and len(m10.shard_table([])) == 4
    assert m10.read_shard_table(table) == [(s.offset, s.size, s.label) for s in samples]
    with pytest.raises(ValueError, match="5 samples"):
        m10.read_shard_table(table[:-1])


def test_three_ways_to_a_sample_find_the_same_bytes_with_their_requests_and_index_bytes(served, tmp_path) -> None:
    import io
    import tarfile

    endpoint, network, bucket, _ = served
    client = endpoint.through(network.url).client()
    members = {f"s{i}": bytes([i]) * (700 + 300 * i) for i in range(3)}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            for suffix, payload in (("cls", b"1"), ("jpg", data)):
                info = tarfile.TarInfo(f"{name}.{suffix}")
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    shard = "ways/shard-00000.tar"
    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as tar:
        entries = [StoredSample(m.name[:-4], 1, "", shard, m.offset_data, m.size) for m in tar if m.name.endswith(".jpg")]
    index_document = json.dumps({"samples": [{"key": e.key, "shard": shard, "offset": e.offset, "size": e.size}
                                             for e in entries]}).encode()
    manifest = json.dumps({"shards": [{"key": shard, "samples": 3, "table": "ways/shard-00000.tar.table"}]}).encode()
    objects = {shard: buffer.getvalue(), "ways/index.json": index_document, "ways/manifest.json": manifest,
               "ways/shard-00000.tar.table": m10.shard_table(entries)}
    for key, data in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)
    try:
        network.reset()
        by_index = m10.first_sample_by_global_index(client, bucket, "ways/index.json", shard, 2)
        assert (by_index.sample, by_index.requests, by_index.index_bytes) == (members["s2"], 2, len(index_document))
        assert by_index.bytes_received == len(index_document) + len(members["s2"]) and network.stats().gets == 2
        by_table = m10.first_sample_by_shard_table(client, bucket, "ways/manifest.json", shard, 1)
        assert (by_table.sample, by_table.requests) == (members["s1"], 3)
        assert by_table.index_bytes == len(manifest) + 4 + 3 * 12
        network.reset()
        streamed = m10.first_sample_by_streaming(client, bucket, shard)
        assert (streamed.sample, streamed.requests, streamed.index_bytes) == (members["s0"], 1, 0)
        assert network.stats().gets == 1 and streamed.bytes_received <= len(buffer.getvalue())
    finally:
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in objects]})


def test_an_expired_presigned_url_is_refused_and_a_fresh_one_answers(served, monkeypatch) -> None:
    import datetime

    import botocore.auth

    endpoint, network, bucket, bodies = served
    key = next(iter(bodies))
    signer = endpoint.through(network.url).client(signature_version="s3v4")
    fresh = signer.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=60)
    an_hour_ago = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(hours=1)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: an_hour_ago)
    expired = signer.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=60)
    assert m10.url_answer(expired) == (403, "AccessDenied", "Request has expired")
    assert m10.url_answer(fresh) == (200, "", "")


def test_refreshable_credentials_are_fetched_again_before_they_expire_and_every_get_succeeds(served) -> None:
    import time

    endpoint, network, bucket, bodies = served
    client, fetches = m10.refreshing_client(endpoint.through(network.url), lifetime_s=0.3, refresh_before_s=0.1)
    key, body = next(iter(bodies.items()))
    for _ in range(6):
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body
        time.sleep(0.1)
    assert len(fetches) >= 3, f"6 GETs over 0.6 s with credentials of 0.3 s: fetched {len(fetches)} times"


def stall_seed(bucket: str, key: str, stalls: tuple[bool, ...]) -> int:
    """A proxy seed whose first GETs of the whole object stall (True) or not, in that order (p_stall = 0.5)."""
    from loaderlab.storage.netem import unit_draw

    return next(seed for seed in range(10_000)
                if all((unit_draw(seed, "GET", f"/{bucket}/{key}?", "", attempt, "stall") < 0.5) == stall
                       for attempt, stall in enumerate(stalls)))


def test_a_stalled_body_holds_a_default_client_for_the_whole_stall_and_a_read_timeout_ends_it(served) -> None:
    import time

    from botocore.exceptions import ReadTimeoutError, ResponseStreamingError

    from loaderlab.storage.netem import PROFILES

    endpoint, network, bucket, bodies = served
    key, body = max(bodies.items(), key=lambda item: len(item[1]))
    waiting = endpoint.through(network.url).client(retries={"total_max_attempts": 1})
    hurried = endpoint.through(network.url).client(read_timeout=0.2, retries={"total_max_attempts": 1})
    network.use(replace(PROFILES["loopback"], name="stall", p_stall=1.0, stall_s=0.6))
    try:
        for client, error, least_s, most_s in ((waiting, ResponseStreamingError, 0.6, 5.0),
                                               (hurried, ReadTimeoutError, 0.2, 0.55)):
            network.reset()
            start = time.perf_counter()
            with pytest.raises(error):
                m10.read_plain(client, bucket, key)
            assert least_s <= time.perf_counter() - start < most_s
        network.use(replace(PROFILES["loopback"], name="stall then none", p_stall=0.5, stall_s=5.0,
                            seed=stall_seed(bucket, key, (True,))))
        network.reset()   # the fault schedule counts attempts from here
        start = time.perf_counter()
        data, resumed_from = m10.read_resuming(hurried, bucket, key, max_resumes=64)  # each resume stalls with p 0.5
        assert data == body and len(resumed_from) >= 1 and time.perf_counter() - start < 5.0
        assert network.stats().stalls >= 1
    finally:
        network.use("loopback")


def test_a_hedged_get_delivers_from_the_second_request_while_the_first_stalls(served) -> None:
    import time

    from loaderlab.storage.netem import PROFILES

    endpoint, network, bucket, bodies = served
    key, body = next(iter(bodies.items()))
    client = endpoint.through(network.url).client(read_timeout=5, max_pool_connections=4)
    network.use(replace(PROFILES["loopback"], name="first stalls", p_stall=0.5, stall_s=1.0,
                        seed=stall_seed(bucket, key, (True, False))))
    try:
        network.reset()
        start = time.perf_counter()
        data, resumed_from = m10.read_hedged(client, bucket, key, hedge_after_s=0.1)
        elapsed = time.perf_counter() - start
        assert data == body and resumed_from == () and 0.1 <= elapsed < 0.9
        assert network.stats().gets_by_key[f"{bucket}/{key}"] == 2  # (the stalled first one resumes later, alone)
        other = next(k for k in bodies if k != key)
        network.use("loopback")   # no stall: the first GET delivers long before the hedge's delay
        assert m10.read_hedged(client, bucket, other, hedge_after_s=5.0)[0] == bodies[other]
        assert network.stats().gets_by_key[f"{bucket}/{other}"] == 1, "a GET that delivers in time is not hedged"
    finally:
        network.use("loopback")


def test_read_latencies_times_every_key_it_delivers() -> None:
    import time

    def read(client, bucket, key):
        time.sleep(0.05 if key == "slow" else 0.0)
        if key == "bad":
            raise OSError("no")
        return key.encode(), ()

    delivery, seconds = m10.read_latencies(None, "b", ["fast", "slow", "bad"], 3, read)
    assert set(delivery.bodies) == {"fast", "slow"} and delivery.failures == {"OSError": 1}
    assert set(seconds) == {"fast", "slow", "bad"} and seconds["slow"] >= 0.05 > seconds["fast"]


# ---- notebook 10 and quiz 10 -----------------------------------------------------------------------------------------

def test_notebook_10_starts_and_stops_its_storage_and_ends_with_exercises_14_15_and_the_quiz() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert re.search(r"takes about .* on 2 cores", markdown[0]), "say at the top how long the notebook takes on 2 cores"
    assert "m10.start_lab(" in code[0] and "lab.close()" in code[-1]
    assert all(name in markdown[-1] for name in ("ex14_remote_shards", "ex15_exactly_once", "make hint EX=ex15",
                                                 "grader.quiz 10"))
    paper = next(m for m in markdown if m.startswith("## 9. A real job, on paper"))
    assert "computed, not measured" in paper


def test_notebook_10_part_2_comes_before_the_closing_cells_and_cites_its_issues() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    part_2 = next(i for i, m in enumerate(markdown) if m.startswith("# Part 2 · When the network fails"))
    closing = next(i for i, m in enumerate(markdown) if m.startswith("## What you measured"))
    assert part_2 < closing
    text = "\n".join(markdown[part_2:closing])
    for section in ("## 10.", "## 11.", "## 12.", "## 13.", "## 14.", "## 15. Exercise 15"):
        assert section in text, f"part 2 lacks its section {section}"
    for issue in ("webdataset#188", "litData#233", "torchtitan#3338", "datasets#8308", "webdataset#432"):
        assert issue in text, f"part 2 no longer cites {issue}"
    hang = next("".join(c["source"]) for c in cells if "m10.train_on_rank" in "".join(c["source"]))
    limit = re.search(r"^RANKS, RANK_BATCH, HANG_LIMIT_S = \d+, \d+, ([\d.]+)$", hang, re.M)
    assert limit and float(limit.group(1)) <= 3 and hang.count("run_ranks(") == 1, (
        "ranks are dear: one run_ranks call in the cell (two runs), the hang's limit a few seconds")


def test_quiz_10_has_eight_to_twelve_questions_grounded_in_the_notebook() -> None:
    module = quiz.load("10")
    assert 8 <= len(module.questions) <= 16
    assert all(quiz.grade(module, [q.answer for q in module.questions]))
    assert all("notebook" in q.why for q in module.questions), "ground every `why` in notebook 10"
