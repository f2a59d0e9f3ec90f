"""What notebook 10 measures: one request's time and N in flight against the model, LIST against an index, range
reads with neighbours coalesced, a shard cache against a least-recently-used simulation, and the price of an epoch.

The model (one request of S bytes, first-byte latency L, B bytes/s per connection): it takes L + S/B seconds, so one
connection carries r = S / (L + S/B) bytes/s; N requests in flight carry min(N r, the total bandwidth, what the client's
CPU can issue, the prefixes' request rate x S). How many must be in flight to fill a bandwidth X is Little's law,
N = X x T with T = L + S/B, the time each request spends in flight; the network's own bandwidth-delay product is a
number of bytes, the bandwidth times the round trip (here the first-byte latency L). Every function here that touches
the server takes a boto3 client made by `loaderlab.storage.server.Endpoint.client` and a bucket, so the notebook can
point it at the server or the proxy.
"""

from __future__ import annotations

import atexit
import io
import json
import math
import random
import re
import shutil
import struct
import tarfile
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loaderlab.storage.bucket import RemoteSplit, StoredSample, index_key, remote_split
from loaderlab.storage.netem import RATE_WINDOW_S
from loaderlab.storage.session import StorageSession, storage_session

LIST_PAGE_KEYS = 1000  # the most keys one ListObjectsV2 answer holds (S3 API reference: "up to 1,000")
REQUEST_TIMEOUT_S = 30  # a request that sends nothing for this long is an error, not a hang


# ---- the model -------------------------------------------------------------------------------------------------

def request_seconds(size_bytes: float, latency_s: float, connection_bytes_per_s: float | None) -> float:
    """One request's time: the first-byte latency, then the body at the connection's bandwidth (none: no wait)."""
    return latency_s + (size_bytes / connection_bytes_per_s if connection_bytes_per_s else 0.0)


@dataclass(frozen=True)
class Ceilings:
    """What limits N requests in flight, besides N itself (None: no such limit)."""

    latency_s: float
    connection_bytes_per_s: float | None
    total_bytes_per_s: float | None = None
    prefix_gets_per_s: float | None = None
    prefixes: int = 1
    client_gets_per_s: float | None = None



def ceilings_of(profile: Any, prefixes: int = 1, client_gets_per_s: float | None = None) -> Ceilings:
    """The model's limits for a `loaderlab.storage.netem.NetworkProfile`, keys spread over `prefixes` prefixes,
    and a client that issues at most `client_gets_per_s` requests/s (None: not measured)."""
    return Ceilings(profile.latency_s, profile.connection_bytes_per_s, profile.total_bytes_per_s,
                    profile.prefix_gets_per_s, prefixes, client_gets_per_s)

def in_flight_model(in_flight: int, size_bytes: float, ceilings: Ceilings,
                    requests: int | None = None) -> tuple[float, str]:
    """Requests/s that `in_flight` requests of `size_bytes` can reach, and the name of the limit that sets it:
    min(N r / S, total bandwidth / S, the client's requests/s, prefixes x the prefix's requests/s).

    The prefix limit is a sliding window of RATE_WINDOW_S (the proxy's, as S3's is a rate): a run of `requests`
    that puts no more on a prefix than one window admits can never be refused, so for such a run the limit is left
    out (None: a run long enough for it to bind)."""
    limits = {f"{in_flight} in flight": in_flight / request_seconds(size_bytes, ceilings.latency_s,
                                                                  ceilings.connection_bytes_per_s)}
    if ceilings.total_bytes_per_s:
        limits["total bandwidth"] = ceilings.total_bytes_per_s / size_bytes
    if ceilings.client_gets_per_s:
        limits["client CPU"] = ceilings.client_gets_per_s
    admitted = ceilings.prefixes * ceilings.prefix_gets_per_s * RATE_WINDOW_S if ceilings.prefix_gets_per_s else 0
    if ceilings.prefix_gets_per_s and (requests is None or requests > admitted):
        limits[f"{ceilings.prefixes} prefix(es)"] = ceilings.prefixes * ceilings.prefix_gets_per_s
    name = min(limits, key=limits.__getitem__)
    return limits[name], name


def in_flight_to_fill(size_bytes: float, ceilings: Ceilings) -> float:
    """The requests of `size_bytes` in flight that fill the total bandwidth, by Little's law N = X x T: X the
    total bandwidth in requests/s (bandwidth / S), T one request's time L + S/B (infinite without a total cap)."""
    if not ceilings.total_bytes_per_s:
        return math.inf
    return ceilings.total_bytes_per_s * request_seconds(size_bytes, ceilings.latency_s,
                                                         ceilings.connection_bytes_per_s) / size_bytes


def bandwidth_delay_bytes(ceilings: Ceilings) -> float:
    """The network's bandwidth-delay product: the total bandwidth times the round trip (the first-byte latency L
    here), in bytes, whatever the object size (infinite without a total cap)."""
    return ceilings.total_bytes_per_s * ceilings.latency_s if ceilings.total_bytes_per_s else math.inf



def batch_model_seconds(sizes: Sequence[float], in_flight: int, ceilings: Ceilings) -> float:
    """The model's time for GETs of `sizes` bytes, `in_flight` at a time: at least the longest request, the
    requests' total time shared by the connections, and the bytes over the total bandwidth."""
    times = [request_seconds(size, ceilings.latency_s, ceilings.connection_bytes_per_s) for size in sizes]
    floor = sum(sizes) / ceilings.total_bytes_per_s if ceilings.total_bytes_per_s else 0.0
    return max(max(times), sum(times) / in_flight, floor)

# ---- requests --------------------------------------------------------------------------------------------------

class NotPartialContent(RuntimeError):
    """A ranged GET answered with something other than 206 Partial Content and the range asked for."""


@dataclass(frozen=True)
class Get:
    """One GET: a key, and a byte range [start, start + size) or None for the whole object."""

    key: str
    start: int | None = None
    size: int | None = None


def get_bytes(client: Any, bucket: str, get: Get) -> bytes:
    """The bytes of one GET. A ranged GET must come back as 206 with the range asked for, and exactly that many
    bytes: a server that ignores `Range` answers 200 with the whole object, which would be read as the sample."""
    if get.start is None:
        return client.get_object(Bucket=bucket, Key=get.key)["Body"].read()
    last = get.start + get.size - 1
    answer = client.get_object(Bucket=bucket, Key=get.key, Range=f"bytes={get.start}-{last}")
    status = answer["ResponseMetadata"]["HTTPStatusCode"]
    content_range = answer.get("ContentRange", "")
    if status != 206 or not content_range.startswith(f"bytes {get.start}-{last}/"):
        answer["Body"].close()
        raise NotPartialContent(f"GET {bucket}/{get.key} bytes {get.start}-{last}: the server answered {status} "
                                f"(Content-Range {content_range or 'absent'}), not 206 with that range; a server "
                                "that ignores Range sends the whole object")
    data = answer["Body"].read()
    if len(data) != get.size:
        raise NotPartialContent(f"GET {bucket}/{get.key} bytes {get.start}-{last}: {len(data)} bytes came back, "
                                f"not {get.size}")
    return data


@dataclass
class Fetched:
    """What `fetch_all` did: the bodies in the order asked, the seconds it took, requests and bytes."""

    bodies: list[bytes]
    seconds: float

    @property
    def requests(self) -> int:
        return len(self.bodies)

    @property
    def bytes(self) -> int:
        return sum(map(len, self.bodies))

    @property
    def per_s(self) -> float:
        return self.requests / self.seconds


def fetch_all(client: Any, bucket: str, gets: Sequence[Get], in_flight: int) -> Fetched:
    """Every GET of `gets`, at most `in_flight` at a time (a thread each; the client's pool must hold that many
    connections), bodies in the order of `gets`."""
    start = time.perf_counter()
    if in_flight == 1:
        bodies = [get_bytes(client, bucket, get) for get in gets]
    else:
        with ThreadPoolExecutor(in_flight) as pool:
            bodies = list(pool.map(lambda get: get_bytes(client, bucket, get), gets, timeout=REQUEST_TIMEOUT_S * 4))
    return Fetched(bodies, time.perf_counter() - start)


def client_cpu_per_get(client: Any, bucket: str, gets: Sequence[Get], in_flight: int) -> tuple[Fetched, float]:
    """`fetch_all`, and the CPU seconds this process spent per request meanwhile (boto3's own cost: signing,
    parsing, copying; the server and the proxy run in other processes)."""
    cpu = time.process_time()
    fetched = fetch_all(client, bucket, gets, in_flight)
    return fetched, (time.process_time() - cpu) / fetched.requests


# ---- LIST against an index ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Listing:
    sizes: dict[str, int]  # key -> bytes, in the order listed
    pages: int
    seconds: float


def list_keys(client: Any, bucket: str, prefix: str, page_keys: int = LIST_PAGE_KEYS,
              max_pages: int | None = None) -> Listing:
    """Every key under `prefix` with its size, page after page (each page needs the previous one's continuation
    token, so pages cannot be fetched in parallel); with `max_pages`, only the keys of that many pages."""
    sizes, pages, token = {}, 0, None
    start = time.perf_counter()
    while True:
        asked = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page_keys}
        answer = client.list_objects_v2(**asked, **({"ContinuationToken": token} if token else {}))
        pages += 1
        sizes.update((item["Key"], int(item["Size"])) for item in answer.get("Contents", []))
        token = answer.get("NextContinuationToken")
        if not answer.get("IsTruncated") or pages == max_pages:
            return Listing(sizes, pages, time.perf_counter() - start)


def read_index(client: Any, bucket: str, split: str) -> RemoteSplit:
    """The split's shard index, read with one GET (no LIST), as a `loaderlab.storage.bucket.RemoteSplit`: every
    sample's key, label, object key, shard key, and offset and size in its shard."""
    return remote_split(split, json.loads(get_bytes(client, bucket, Get(index_key(split)))))


# ---- range reads, neighbours coalesced ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Span:
    """One ranged GET covering one or more wanted samples of one shard: [start, end) and the samples inside."""

    shard: str
    start: int
    end: int
    members: tuple[StoredSample, ...]

    @property
    def wanted_bytes(self) -> int:
        return sum(m.size for m in self.members)


def coalesce(wanted: Iterable[StoredSample], max_gap: int) -> list[Span]:
    """Group the wanted samples into ranged GETs: within a shard, in offset order, a sample joins the current span
    when the bytes between them are at most `max_gap` (those bytes are fetched and thrown away)."""
    spans: list[Span] = []
    for entry in sorted(wanted, key=lambda e: (e.shard_key, e.offset)):
        last = spans[-1] if spans else None
        if last and last.shard == entry.shard_key and entry.offset - last.end <= max_gap:
            spans[-1] = Span(last.shard, last.start, max(last.end, entry.offset + entry.size),
                             last.members + (entry,))
        else:
            spans.append(Span(entry.shard_key, entry.offset, entry.offset + entry.size, (entry,)))
    return spans


@dataclass(frozen=True)
class RangeRead:
    samples: dict[str, bytes]  # key -> the sample's bytes
    requests: int
    fetched_bytes: int
    wanted_bytes: int
    seconds: float

    @property
    def over_fetch(self) -> float:
        """Bytes fetched beyond the wanted ones, as a share of the wanted ones."""
        return self.fetched_bytes / self.wanted_bytes - 1


def read_by_ranges(client: Any, bucket: str, wanted: Sequence[StoredSample], max_gap: int,
                   in_flight: int) -> RangeRead:
    """The wanted samples' bytes, by ranged GETs of coalesced spans (`coalesce`), `in_flight` at a time."""
    spans = coalesce(wanted, max_gap)
    fetched = fetch_all(client, bucket, [Get(s.shard, s.start, s.end - s.start) for s in spans], in_flight)
    samples = {m.key: body[m.offset - span.start:m.offset - span.start + m.size]
               for span, body in zip(spans, fetched.bodies) for m in span.members}
    return RangeRead(samples, len(spans), fetched.bytes, sum(s.wanted_bytes for s in spans), fetched.seconds)


# ---- a local shard cache and its simulation -------------------------------------------------------------------------

class ShardCache:
    """Whole shards kept in a local folder within `budget_bytes`, the least recently used evicted first.

    `path(shard)` returns the shard's local file, fetching it with `fetch(shard)` on a miss after evicting until
    it fits; the folder never holds more than the budget. A shard larger than the whole budget is refused.
    """

    def __init__(self, folder: Path, budget_bytes: int, fetch: Callable[[str], bytes]) -> None:
        self.folder, self.budget_bytes, self.fetch = Path(folder), budget_bytes, fetch
        self.folder.mkdir(parents=True, exist_ok=True)
        self._sizes: OrderedDict[str, int] = OrderedDict()  # shard -> bytes, least recently used first
        self.hits = self.misses = 0

    def _file(self, shard: str) -> Path:
        return self.folder / shard.replace("/", "__")

    @property
    def held_bytes(self) -> int:
        return sum(self._sizes.values())

    def path(self, shard: str) -> Path:
        if shard in self._sizes:
            self.hits += 1
            self._sizes.move_to_end(shard)
            return self._file(shard)
        self.misses += 1
        data = self.fetch(shard)
        if len(data) > self.budget_bytes:
            raise ValueError(f"shard {shard} is {len(data)} bytes, more than the cache's whole budget "
                             f"({self.budget_bytes} bytes)")
        while self.held_bytes + len(data) > self.budget_bytes:
            evicted, _ = self._sizes.popitem(last=False)
            self._file(evicted).unlink()
        self._file(shard).write_bytes(data)
        self._sizes[shard] = len(data)
        return self._file(shard)


def simulate_lru(accesses: Sequence[str], sizes: dict[str, int], budget_bytes: int) -> list[bool]:
    """For each access in order, whether a least-recently-used cache of `budget_bytes` holding whole items of
    `sizes` would have had it (no file, no fetch: the same rule as `ShardCache`, on paper)."""
    held: OrderedDict[str, int] = OrderedDict()
    hits = []
    for item in accesses:
        hits.append(item in held)
        if item in held:
            held.move_to_end(item)
            continue
        while held and sum(held.values()) + sizes[item] > budget_bytes:
            held.popitem(last=False)
        held[item] = sizes[item]
    return hits


def shard_order(shards: Sequence[str], epochs: int, how: str, seed: int = 0) -> list[list[str]]:
    """Each epoch's shard order: "same" (written order every epoch), "alternate" (written, then reversed, ...),
    or "shuffled" (a new permutation per epoch, drawn from (seed, epoch))."""
    if how == "same":
        return [list(shards) for _ in range(epochs)]
    if how == "alternate":
        return [list(shards) if epoch % 2 == 0 else list(reversed(shards)) for epoch in range(epochs)]
    if how == "shuffled":
        return [random.Random(seed * 1_000_003 + epoch).sample(list(shards), len(shards)) for epoch in range(epochs)]
    raise ValueError(f"how must be 'same', 'alternate' or 'shuffled', not {how!r}")


# ---- prices ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prices:
    """Request prices per 1,000 requests, with where and when they were read."""

    get_per_1000: float
    list_per_1000: float
    put_per_1000: float
    source: str

    def requests(self, gets: float = 0, lists: float = 0, puts: float = 0) -> float:
        """Dollars for these request counts."""
        return (gets * self.get_per_1000 + lists * self.list_per_1000 + puts * self.put_per_1000) / 1000


S3_STANDARD = Prices(
    get_per_1000=0.0004, list_per_1000=0.005, put_per_1000=0.005,
    source=("S3 Standard, US East (N. Virginia): GET $0.0004 and PUT, COPY, POST, LIST $0.005 per 1,000 requests, "
            "aws.amazon.com/s3/pricing (its price tables render only in a browser: read on 2026-11-28 and 2026-12-07 "
            "as quoted by summaries of it, c3x.dev 's3-request-fees-explained'); the S3 FAQ: no data transfer charge "
            "between EC2 and S3 in the same Region"))


@dataclass(frozen=True)
class TransferPrices:
    """Dollars per GB moved from S3 to a reader outside the bucket's Region, or through a NAT gateway, with where
    and when each rate was read."""

    internet_per_gb: float       # S3 to the internet (a laptop, another cloud)
    cross_region_per_gb: float   # S3 to EC2 in another AWS Region
    nat_per_gb: float            # a NAT gateway's data processing, on top (a subnet without an S3 gateway endpoint)
    source: str

    def dollars(self, gigabytes: float) -> dict[str, float]:
        """What moving `gigabytes` costs each way: same Region (free), cross-Region, internet, and the NAT gateway's
        processing that a private subnet without an S3 endpoint adds to any of them."""
        return {"same Region": 0.0, "cross-Region": gigabytes * self.cross_region_per_gb,
                "internet": gigabytes * self.internet_per_gb, "NAT gateway processing": gigabytes * self.nat_per_gb}


S3_TRANSFER = TransferPrices(
    internet_per_gb=0.09, cross_region_per_gb=0.02, nat_per_gb=0.045,
    source=("data transfer from US East (N. Virginia), read on 2026-12-07: internet $0.09 per GB (the first 10 TB a "
            "month) and cross-Region $0.02 per GB as commonly published (usage.ai 'S3 Egress Cost', June 2026; "
            "billspike.io 'AWS Data Transfer Costs Explained', March 2026), unverified against "
            "aws.amazon.com/s3/pricing, "
            "whose tables render only in a browser; NAT gateway data processing $0.045 per GB from "
            "aws.amazon.com/vpc/pricing's NAT gateway example (US East (Ohio)), as transcribed on 2026-09-20"))


# ---- the job on paper ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PaperJob:
    """A real job's loading, computed from the model (not measured): one row per way of storing the samples."""

    images_per_s: float
    image_bytes: float
    dataset_images: int
    latency_s: float
    connection_bytes_per_s: float
    prefix_gets_per_s: float
    prices: Prices = S3_STANDARD

    @property
    def epoch_seconds(self) -> float:
        return self.dataset_images / self.images_per_s

    @property
    def epoch_bytes(self) -> float:
        return self.dataset_images * self.image_bytes

    def break_even_gpu_hour(self, dollars_per_epoch: float, gpus: int) -> float:
        """The price per GPU-hour at which `gpus` GPUs, busy for one epoch, cost `dollars_per_epoch`."""
        return dollars_per_epoch / (gpus * self.epoch_seconds / 3600)

    def row(self, object_bytes: float) -> dict[str, float]:
        """Requests of `object_bytes` each (one image, or a shard): bytes/s, GET/s, connections, prefixes,
        dollars of GETs per epoch."""
        bytes_per_s = self.images_per_s * self.image_bytes
        gets_per_s = bytes_per_s / object_bytes
        per_connection = object_bytes / request_seconds(object_bytes, self.latency_s, self.connection_bytes_per_s)
        gets_per_epoch = self.epoch_bytes / object_bytes
        return {"bytes_per_s": bytes_per_s, "gets_per_s": gets_per_s,
                "connections": bytes_per_s / per_connection, "prefixes": gets_per_s / self.prefix_gets_per_s,
                "gets_per_epoch": gets_per_epoch, "dollars_per_epoch": self.prices.requests(gets=gets_per_epoch)}


# ---- the notebook's server, proxy and data -----------------------------------------------------------------------

@dataclass(frozen=True)
class StorageLab(StorageSession):
    """The notebook's storage session (the server, the course's data in it, the proxy in front: `StorageSession`),
    with what is the notebook's own: a local work folder, clients with the notebook's options, and `close()`, which
    stops what the session started (also at interpreter exit) and removes the work folder.
    """

    work: Path      # a local folder for this notebook's files (the shard cache, curl's output)
    _stack: ExitStack = field(repr=False)

    def client(self, in_flight: int = 1, through_proxy: bool = True, **config: Any) -> Any:
        """A boto3 client with a pool of `in_flight` connections, through the proxy unless told otherwise, with
        botocore's standard retries (3 attempts) and timeouts."""
        endpoint = self.endpoint if through_proxy else self.server
        options = {"max_pool_connections": max(10, in_flight), "retries": {"mode": "standard", "max_attempts": 3},
                   "connect_timeout": REQUEST_TIMEOUT_S, "read_timeout": REQUEST_TIMEOUT_S}
        return endpoint.client(**(options | config))

    def close(self) -> None:
        self._stack.close()


def start_lab(profile: str, network_profile: str = "loopback") -> StorageLab:
    """`storage_session(network_profile, profile)` (the run's S3 server or one of its own, the `profile` dataset in
    it, a proxy with `network_profile`) and a work folder; all of it stopped by `StorageLab.close()` or at
    interpreter exit."""
    stack = ExitStack()
    try:
        session = stack.enter_context(storage_session(network_profile, profile))
        work = Path(tempfile.mkdtemp(prefix="loaderlab-10-"))
        stack.callback(shutil.rmtree, work, ignore_errors=True)
    except BaseException:
        stack.close()
        raise
    lab = StorageLab(session.server, session.dataset, session.network, work, stack)
    atexit.register(lab.close)
    return lab



# ---- part 2: when the network fails ----------------------------------------------------------------------------------
# What notebook 10's part 2 measures through the proxy's faults: a body cut half way and how to resume it, a
# throttled prefix under three retry policies and each mode's recovery, shards split over ranks, and a resumed stream
# resumed again.

READ_CHUNK_BYTES = 64 * 1024
MAX_RESUMES = 8  # ranged GETs after a body cut short, per object, before read_resuming gives up


class BodyCutShort(RuntimeError):
    """An object's body stopped short more often than read_resuming was allowed to resume it."""


@dataclass
class Delivery:
    """What `deliver` got: the objects delivered, how the others failed, where bodies were resumed, the time."""

    bodies: dict[str, bytes]            # key -> the object's bytes, for each object delivered
    failures: dict[str, int]            # "exception type (error code)" -> objects not delivered
    messages: dict[str, str]            # the same names -> the first such error's message
    resumed_from: dict[str, tuple[int, ...]]  # key -> the offsets its body was resumed from (read_resuming)
    seconds: float


def read_plain(client: Any, bucket: str, key: str) -> tuple[bytes, tuple[int, ...]]:
    """One GET and `Body.read()`, as most code reads an object: the SDK's retries and nothing else."""
    return client.get_object(Bucket=bucket, Key=key)["Body"].read(), ()


def read_managed(client: Any, bucket: str, key: str) -> tuple[bytes, tuple[int, ...]]:
    """boto3's managed download (`download_fileobj`, s3transfer): a body cut after its headers is fetched again from
    its first byte, up to `num_download_attempts` (5) GETs, then RetriesExceededError."""
    buffer = io.BytesIO()
    client.download_fileobj(bucket, key, buffer)
    return buffer.getvalue(), ()


def read_resuming(client: Any, bucket: str, key: str, max_resumes: int = MAX_RESUMES) -> tuple[bytes, tuple[int, ...]]:
    """An object's bytes, and the offsets its body was resumed from: the body is read in chunks, and when it stops
    short or stalls past the client's read timeout (the exception comes out of the read, after get_object
    returned) a ranged GET asks for the bytes from the
    first one not received, for the same version of the object (If-Match its ETag), checked to be that range."""
    from botocore.exceptions import IncompleteReadError, ReadTimeoutError, ResponseStreamingError

    answer = client.get_object(Bucket=bucket, Key=key)
    size, etag = int(answer["ContentLength"]), answer["ETag"]
    received = bytearray()
    resumed_from: list[int] = []
    while True:
        try:
            for chunk in answer["Body"].iter_chunks(READ_CHUNK_BYTES):
                received += chunk
        except (ResponseStreamingError, IncompleteReadError, ReadTimeoutError):
            answer["Body"].close()  # a stalled body (past the client's read timeout) ends here, as a cut one
            # what arrived before the cut or the stall is kept in `received`
        if len(received) == size:
            return bytes(received), tuple(resumed_from)
        if len(resumed_from) == max_resumes:
            raise BodyCutShort(f"GET {bucket}/{key}: the body stopped short {max_resumes + 1} times (last at byte "
                               f"{len(received)} of {size})")
        start = len(received)
        resumed_from.append(start)
        answer = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{size - 1}", IfMatch=etag)
        content_range = answer.get("ContentRange", "")
        if (answer["ResponseMetadata"]["HTTPStatusCode"] != 206
                or not content_range.startswith(f"bytes {start}-{size - 1}/")):
            answer["Body"].close()
            raise NotPartialContent(f"GET {bucket}/{key} bytes {start}-{size - 1} to resume a cut body: answered "
                                    f"{answer['ResponseMetadata']['HTTPStatusCode']} (Content-Range "
                                    f"{content_range or 'absent'}), not 206 with that range")


def read_retrying_at_once(client: Any, bucket: str, key: str, max_attempts: int) -> tuple[bytes, tuple[int, ...]]:
    """`read_plain`, sent again at once after each 503 SlowDown, up to `max_attempts` in all: a retry storm (give
    it a client without retries of its own, `total_max_attempts=1`)."""
    from botocore.exceptions import ClientError

    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    for attempt in range(1, max_attempts + 1):
        try:
            return read_plain(client, bucket, key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "SlowDown" or attempt == max_attempts:
                raise
    raise AssertionError("unreachable")


def failure_name(error: BaseException) -> str:
    """An exception's type, with the S3 error code when it carries one: "ClientError (SlowDown)"."""
    response = getattr(error, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return f"{type(error).__name__} ({code})" if code else type(error).__name__


def deliver(client: Any, bucket: str, keys: Sequence[str], in_flight: int,
            read: Callable[[Any, str, str], tuple[bytes, tuple[int, ...]]],
            stop_after_s: float | None = None) -> Delivery:
    """Read every key with `read`, `in_flight` at a time; an object whose read raised is counted by the error's
    name (`failure_name`), not retried here. With `stop_after_s`, a key not started that long after the start is
    not read at all (neither delivered nor failed): a run that must last a given time, not a given count."""
    bodies: dict[str, bytes] = {}
    resumed: dict[str, tuple[int, ...]] = {}
    failures: dict[str, int] = {}
    messages: dict[str, str] = {}

    def one(key: str) -> None:
        if stop_after_s is not None and time.perf_counter() - start > stop_after_s:
            return
        try:
            bodies[key], offsets = read(client, bucket, key)
            if offsets:
                resumed[key] = offsets
        except Exception as error:  # counted, by name: the cell shows what the reader let through
            name = failure_name(error)
            failures[name] = failures.get(name, 0) + 1
            messages.setdefault(name, str(error))

    start = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, keys, timeout=REQUEST_TIMEOUT_S * 8))
    return Delivery(bodies, failures, messages, resumed, time.perf_counter() - start)


def drain(items: Iterable[Any]) -> tuple[list[Any], BaseException | None]:
    """Everything `items` yields, and the exception that stopped it (None when it ended by itself): what a
    training loop had received when its loader raised."""
    received: list[Any] = []
    try:
        for item in items:
            received.append(item)
    except Exception as error:  # returned, for the notebook to show
        return received, error
    return received, None


# ---- shards over ranks -------------------------------------------------------------------------------------------

def split_by_shard(shards: Sequence[Sequence[str]], rank: int, world_size: int) -> list[str]:
    """This rank's samples when whole shards are dealt to ranks, `shards[rank::world_size]` (WebDataset's
    `split_by_node`): with fewer shards than ranks, some ranks get nothing."""
    return [sample for shard in shards[rank::world_size] for sample in shard]


def split_padded(shards: Sequence[Sequence[str]], rank: int, world_size: int) -> list[str]:
    """This rank's samples when samples, not shards, are dealt: the epoch's order padded to a multiple of
    `world_size` by repeating its last samples (at most world_size - 1), then `padded[rank::world_size]`, dealt as
    MosaicML Streaming interleaves a node's samples over its ranks (`streaming/base/partition/orig.py`, which pads
    with repeats of samples near the end of the node's list rather than the very last ones)."""
    order = [sample for shard in shards for sample in shard]
    if not order:
        return []
    shortfall = -len(order) % world_size
    padded = order + order[len(order) - shortfall:] if shortfall <= len(order) else order * world_size
    return padded[rank::world_size]


def train_on_rank(rank: int, world_size: int, shards: Sequence[Sequence[str]], batch_size: int,
                  padded: bool) -> dict[str, Any]:
    """The data side of a training loop on a real rank: this rank's share of the shards' samples (`split_padded`
    or `split_by_shard`), an all_reduce after every batch as DDP's gradient sync does, and a barrier at the end of
    the epoch as a loop that saves a checkpoint does. Returns the batches run and the samples seen."""
    import torch
    import torch.distributed as dist

    share = (split_padded if padded else split_by_shard)(shards, rank, world_size)
    batches = [share[i:i + batch_size] for i in range(0, len(share), batch_size)]
    for _batch in batches:
        dist.all_reduce(torch.ones(1))  # the gradients
    dist.barrier()  # the end-of-epoch checkpoint
    return {"batches": len(batches), "samples": share}


# ---- resume, twice ---------------------------------------------------------------------------------------------------

class ResumableStream:
    """An epoch of `keys` in order that a training loop can checkpoint (`state_dict`) and resume
    (`load_state_dict`), with one of two ways of keeping its position:

    - counts_in_epoch=True: the position is the samples of the epoch the loop has received, wherever it resumed;
    - counts_in_epoch=False: the state reports the position object made with the stream, and a resume starts a new
      one that the iteration advances instead (huggingface/datasets#8308's mechanism: the dataset kept a reference
      to a stale state dict that `load_state_dict` had replaced), so once a stream was resumed its reported position
      stays at the position the stream was made with (0): the next resume starts the epoch again.
    """

    def __init__(self, keys: Sequence[str], counts_in_epoch: bool) -> None:
        self.keys, self.counts_in_epoch = list(keys), counts_in_epoch
        self._live = {"position": 0}       # what the iteration advances
        self._reported = self._live        # what state_dict() copies

    def state_dict(self) -> dict[str, int]:
        return dict(self._live if self.counts_in_epoch else self._reported)

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._live = {"position": int(state["position"])}  # a new object: the stale reference keeps the old one
        if self.counts_in_epoch:
            self._reported = self._live

    def __iter__(self) -> Iterator[str]:
        while self._live["position"] < len(self.keys):
            key = self.keys[self._live["position"]]
            self._live["position"] += 1
            yield key


def run_with_kills(stream_factory: Callable[[], ResumableStream], kill_after: Sequence[int]) -> list[str]:
    """Every key a training loop receives over one epoch when its process is killed after receiving
    `kill_after[i]` keys in run i, and each next run starts a fresh stream from the checkpoint saved at the kill."""
    received: list[str] = []
    state: dict[str, int] | None = None
    for limit in [*kill_after, None]:
        stream = stream_factory()
        if state is not None:
            stream.load_state_dict(state)
        for count, key in enumerate(stream, 1):
            received.append(key)
            if limit is not None and count == limit:
                break
        state = stream.state_dict()  # the checkpoint the next run resumes from
    return received


# ---- what a ranged GET can answer ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RangeAnswer:
    """What the server answered one GET: the Range (and If-Match) asked, status, Content-Range, body bytes, and the
    S3 error code of a refusal ("" when none)."""

    asked: str
    status: int
    content_range: str
    body_bytes: int
    error_code: str


def range_answer(client: Any, bucket: str, key: str, byte_range: str, if_match: str | None = None) -> RangeAnswer:
    """One GET of `key` with the Range header `byte_range` as written (several ranges, past the end, ...), and
    If-Match when given: what came back, an error answer included (botocore raises it; it is recorded here)."""
    from botocore.exceptions import ClientError

    asked = byte_range + (f", If-Match {if_match}" if if_match is not None else "")
    try:
        answer = client.get_object(Bucket=bucket, Key=key, Range=byte_range,
                                   **({"IfMatch": if_match} if if_match is not None else {}))
    except ClientError as error:
        return RangeAnswer(asked, error.response["ResponseMetadata"]["HTTPStatusCode"], "", 0,
                           error.response.get("Error", {}).get("Code", ""))
    body = answer["Body"].read()
    return RangeAnswer(asked, answer["ResponseMetadata"]["HTTPStatusCode"], answer.get("ContentRange", ""),
                       len(body), "")


# ---- an index that scales: one table per shard ------------------------------------------------------------------------

SHARD_TABLE_ENTRY = struct.Struct("<III")  # a sample's offset, size and label in its shard: 12 bytes
SHARD_TABLE_COUNT = struct.Struct("<I")    # the table's first 4 bytes: how many samples the shard holds


def shard_table(samples: Sequence[StoredSample]) -> bytes:
    """One shard's index as MosaicML's MDS shards carry theirs (a sample count, then fixed-size entries; MDS keeps
    it in the shard's first bytes): the count, then (offset, size, label) of each sample in the shard's order."""
    return SHARD_TABLE_COUNT.pack(len(samples)) + b"".join(
        SHARD_TABLE_ENTRY.pack(s.offset, s.size, s.label) for s in samples)


def read_shard_table(data: bytes) -> list[tuple[int, int, int]]:
    """The (offset, size, label) entries of a `shard_table`; ValueError when its length does not match its count."""
    (count,) = SHARD_TABLE_COUNT.unpack_from(data)
    if len(data) != SHARD_TABLE_COUNT.size + count * SHARD_TABLE_ENTRY.size:
        raise ValueError(f"a shard table of {count} samples is {SHARD_TABLE_COUNT.size + count * SHARD_TABLE_ENTRY.size}"
                         f" bytes, this one {len(data)}")
    return [SHARD_TABLE_ENTRY.unpack_from(data, SHARD_TABLE_COUNT.size + i * SHARD_TABLE_ENTRY.size)
            for i in range(count)]


@dataclass(frozen=True)
class FirstSample:
    """How one way of finding a sample reached its bytes: seconds from nothing to the sample, the requests made,
    the index bytes read before the sample's own request, every body byte received, and the sample's bytes."""

    seconds: float
    requests: int
    index_bytes: int
    bytes_received: int
    sample: bytes


def first_sample_by_global_index(client: Any, bucket: str, index_key: str, shard: str, position: int) -> FirstSample:
    """Time to one sample with a per-sample index (this course's `index.json`): GET the whole index, parse it,
    then one ranged GET of the `position`-th sample of `shard`."""
    start = time.perf_counter()
    raw = get_bytes(client, bucket, Get(index_key))
    entry = [s for s in json.loads(raw)["samples"] if s["shard"] == shard][position]
    sample = get_bytes(client, bucket, Get(shard, entry["offset"], entry["size"]))
    return FirstSample(time.perf_counter() - start, 2, len(raw), len(raw) + len(sample), sample)


def first_sample_by_shard_table(client: Any, bucket: str, manifest_key: str, shard: str,
                                position: int) -> FirstSample:
    """Time to one sample with a per-shard index: GET the manifest (one entry per shard: its key, samples and table
    key), GET that shard's table (`shard_table`), then one ranged GET of the sample."""
    start = time.perf_counter()
    manifest = get_bytes(client, bucket, Get(manifest_key))
    table_key = next(s["table"] for s in json.loads(manifest)["shards"] if s["key"] == shard)
    table = get_bytes(client, bucket, Get(table_key))
    offset, size, _label = read_shard_table(table)[position]
    sample = get_bytes(client, bucket, Get(shard, offset, size))
    index_bytes = len(manifest) + len(table)
    return FirstSample(time.perf_counter() - start, 3, index_bytes, index_bytes + len(sample), sample)


class _CountingReader:
    """A file-like wrapper that counts the bytes read through it."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.bytes_read = raw, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size if size is not None and size >= 0 else None)
        self.bytes_read += len(data)
        return data


def first_sample_by_streaming(client: Any, bucket: str, shard: str) -> FirstSample:
    """Time to the first image of a tar shard read as a stream, no index at all (WebDataset's way): one GET, the
    tar members read in order until the first `.jpg` is whole; the rest of the body is not read (`bytes_received`
    counts what the tar reader took from it, read-ahead included)."""
    start = time.perf_counter()
    answer = client.get_object(Bucket=bucket, Key=shard)
    counting = _CountingReader(answer["Body"])
    try:
        with tarfile.open(fileobj=counting, mode="r|") as tar:
            for member in tar:
                if member.name.endswith(".jpg"):
                    sample = tar.extractfile(member).read()
                    return FirstSample(time.perf_counter() - start, 1, 0, counting.bytes_read, sample)
    finally:
        answer["Body"].close()
    raise ValueError(f"{bucket}/{shard}: no .jpg member")


# ---- keys and presigned URLs that expire --------------------------------------------------------------------------------

def url_answer(url: str, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[int, str, str]:
    """GET a (presigned) URL with no credentials of this process: the status, and the S3 error code and message of
    a refusal ("" when it was answered 2xx). The body of a success is read and dropped."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            answer.read()
            return answer.status, "", ""
    except urllib.error.HTTPError as error:
        text = error.read().decode("utf-8", errors="replace")
        code = re.search(r"<Code>(.*?)</Code>", text)
        message = re.search(r"<Message>(.*?)</Message>", text)
        return error.code, code.group(1) if code else "", message.group(1) if message else ""


def refreshing_client(endpoint: Any, lifetime_s: float, refresh_before_s: float,
                      **config: Any) -> tuple[Any, list[float]]:
    """A boto3 client whose credentials come from botocore's `RefreshableCredentials`, as the default chain's
    instance-profile, container and web-identity (IRSA) providers give them: each set lives `lifetime_s` seconds and
    botocore fetches a new one when less than `refresh_before_s` is left (its own defaults: 15 min advisory, 10 min
    mandatory). The fetch here returns the server's keys with a new expiry time: the server's keys never expire,
    the expiry is the client's. Returns the client and the list of monotonic times of each fetch (it grows)."""
    import datetime

    import boto3
    import botocore.session
    from botocore.config import Config
    from botocore.credentials import CredentialProvider, RefreshableCredentials

    fetches: list[float] = []

    def fetch() -> dict[str, Any]:
        fetches.append(time.monotonic())
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime_s)
        return {"access_key": endpoint.access_key, "secret_key": endpoint.secret_key, "token": None,
                "expiry_time": expiry.isoformat()}

    class ShortLived(CredentialProvider):
        METHOD = "loaderlab-short-lived"

        def load(self) -> RefreshableCredentials:
            return RefreshableCredentials.create_from_metadata(fetch(), fetch, self.METHOD,
                                                               advisory_timeout=refresh_before_s,
                                                               mandatory_timeout=refresh_before_s / 2)

    session = botocore.session.get_session()
    session.get_component("credential_provider").insert_before("env", ShortLived())
    s3_options = {"addressing_style": "path", **config.pop("s3", {})}
    client = boto3.Session(botocore_session=session).client(
        "s3", endpoint_url=endpoint.url, region_name=endpoint.region, config=Config(s3=s3_options, **config))
    return client, fetches


# ---- a body that stalls: timeouts, hedging and the tail ------------------------------------------------------------------

def read_latencies(client: Any, bucket: str, keys: Sequence[str], in_flight: int,
                   read: Callable[[Any, str, str], tuple[bytes, tuple[int, ...]]]) -> tuple[Delivery, dict[str, float]]:
    """`deliver`, and each key's seconds from the start of its read to its bytes (or its error): the latency a
    training loop waits on for that sample."""
    seconds: dict[str, float] = {}

    def timed(client: Any, bucket: str, key: str) -> tuple[bytes, tuple[int, ...]]:
        start = time.perf_counter()
        try:
            return read(client, bucket, key)
        finally:
            seconds[key] = time.perf_counter() - start

    return deliver(client, bucket, keys, in_flight, timed), seconds


def read_hedged(client: Any, bucket: str, key: str, hedge_after_s: float) -> tuple[bytes, tuple[int, ...]]:
    """`read_resuming`, and if it has not returned after `hedge_after_s`, a second one of the same object on another
    connection of the pool (AWS: retry a slow small GET, "using a new connection"); the first to deliver wins. The
    loser is left to end by itself: give the client a read timeout, or a stalled loser holds its thread and
    connection until the stall ends. Returns the winner's bytes and resume offsets (the proxy counts the hedges)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pool = ThreadPoolExecutor(2)
    try:
        first = pool.submit(read_resuming, client, bucket, key)
        done, _ = wait([first], timeout=hedge_after_s)
        if done:
            return first.result()
        second = pool.submit(read_resuming, client, bucket, key)
        pending = {first, second}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                if future.exception() is None:
                    return future.result()
        return first.result()  # both failed: the first one's error
    finally:
        pool.shutdown(wait=False)
