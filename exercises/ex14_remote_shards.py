"""Exercise 14: a remote shard reader, over a real S3 server behind an emulated network.

The course's data sits in a SeaweedFS bucket (`loaderlab.storage.bucket`): one object per image, and the same images
in tar shards (`loaderlab.tar_shards`' layout: `<key>.jpg` and `<key>.cls` per sample) with an index,
`shards/<split>/index.json`, whose "samples" list gives every sample's key, label, object key, shard key, and the
offset and size of its image bytes in that shard. Between you and the server
sits the course's proxy, which delays and paces every request as a network would (first-byte latency L, bandwidth B
per connection) and counts what it sees: requests, bytes, LISTs, the most requests in flight, GETs per key. Those
counters, not your code's own, are what the grader reads.

Talk to the server with `endpoint.client()` (boto3, threads) or obstore (asyncio or its blocking calls); every
function here takes the `loaderlab.storage.server.Endpoint` to use, and a bucket.

Build it in steps; each TODO names its step, and `pytest grader/test_ex14_remote_shards.py` shows each step's status:
  1 shards, not objects (TODO(ex14, step 1))      2 requests in flight (TODO(ex14, step 2))
  3 an index, range reads (TODO(ex14, step 3))    4 a local cache (TODO(ex14, step 4))
  5 bad input (TODO(ex14, step 5))
Hints: `make hint EX=ex14` (LEVEL=1 to 5, from a nudge to nearly the answer).

Contract (the grader checks each point; [n] is the step that checks it):
- [1][3] every reader's `label` is an int, and its `data` the image file's bytes (`bytes`), or `decode(bytes)` when a
  decode is given;
- [1] `object_samples` gets each object in one GET, one request at a time, in the order given, and yields
  `RemoteSample(object key, data, label given)`;
- [1] `shard_samples` yields every sample of the shards given, in written order, as `RemoteSample(sample key, data,
  label)` (the key and label as the shard stores them), reading each shard whole in one streamed GET: at most 2
  requests per shard, none per sample, and each sample yielded as its bytes arrive (the shard's first sample before
  its last byte, never the shard held whole first);
- [1] under the `region` profile, `shard_samples` reaches at least half the speed-up over `object_samples` that the
  model r = S / (L + S/B) gives for their requests (one per shard against one per sample);
- [2] `fetch_in_flight` yields each object's bytes in the order of the keys given (a key given twice comes twice), one
  GET per key given, never with more than `in_flight` requests open, whatever the keys and however slowly its
  consumer reads, and under `region` with a first-byte latency of 200 ms reaches 60% of the model's speed-up over one
  request at a time at 16 in flight;
- [2] when its consumer stops early (the generator is closed) or a GET fails, every thread or task it started has
  stopped before control returns;
- [3] `ShardIndex` reads the index once, when it is made (no LIST, ever); `read(keys)` returns the samples asked
  for, in that order, fetched by `Range` from their shards: samples next to each other in a shard (only tar headers
  between them) in one request, and at most 10% more bytes than the samples' own (each counted once: a key asked
  twice comes twice, fetched once), whatever the pattern of keys; an answer that is not
  206 Partial Content raises an error naming the shard, never hands the body on as the sample;
- [4] `ShardCache.get(shard_key)` returns the shard's bytes (each key a shard of its own: `shards/train/shard-00000.tar`
  and `shards/val/shard-00000.tar` are two), kept in `cache_dir`, whose files (every file under it, downloads in
  progress included) never add up to more than `budget_bytes`, whatever the shards' sizes and however many threads
  call `get`; before a new shard is written the least recently used are removed until it fits; a shard several
  threads ask for at once is fetched once, and when that fetch fails each of them gets an error promptly (or tries
  again itself), never waits on; a failed fetch is not kept: the next `get` tries again;
- [5] bad input raises, within 20 s, an error whose message names what and where: wrong credentials, a missing
  bucket or key, or no server at the endpoint (the bucket or key and the endpoint's URL); a shard cut short, wherever
  the cut falls, inside a member or at a member's boundary (a tar ends with two zero blocks after its last member)
  (the shard's key); an index entry past its shard's end (the sample's and the shard's keys). A request that fails
  on every attempt (a body the network breaks off) raises within 20 s too. Never a hang, never a silently short epoch.
"""

from __future__ import annotations

import io  # noqa: F401  (you will need these)
import json  # noqa: F401
import tarfile  # noqa: F401
import threading  # noqa: F401
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from loaderlab.storage.server import Endpoint


class RemoteSample(NamedTuple):
    """One sample read from the store."""

    key: str     # object_samples: the object's key; the others: the sample's key ("circles/circles_000003")
    data: Any    # the image file's bytes as stored, or decode(bytes) when a decode is given
    label: int


def object_samples(endpoint: Endpoint, bucket: str, objects: Sequence[tuple[str, int]],
                   decode: Callable[[bytes], Any] | None = None) -> Iterator[RemoteSample]:
    """One sample per (object key, label), each object fetched in a GET of its own, one at a time, in this order."""
    # TODO(ex14, step 1): the per-object loader, the baseline every other reader here beats: one GET per
    # object, waited for before the next is sent. Each request pays the first-byte latency again; count how
    # many you send for 200 samples and what that costs at 50 ms each.
    raise NotImplementedError("TODO(ex14, step 1) in exercises/ex14_remote_shards.py: object_samples (shards, not objects)")


def shard_samples(endpoint: Endpoint, bucket: str, shard_keys: Sequence[str],
                  decode: Callable[[bytes], Any] | None = None) -> Iterator[RemoteSample]:
    """Every sample of these tar shards, shard after shard, each in written order, each shard read in one GET."""
    # TODO(ex14, step 1): one GET per shard, parsed as its bytes arrive (a tar is a stream of members:
    # header, then data): the latency is paid once per shard instead of once per sample. A sample is two
    # members with one key, its image and its label; yield it once both are read.
    raise NotImplementedError("TODO(ex14, step 1) in exercises/ex14_remote_shards.py: shard_samples (shards, not objects)")


def fetch_in_flight(endpoint: Endpoint, bucket: str, keys: Sequence[str], in_flight: int) -> Iterator[bytes]:
    """Each object's bytes, in the order of `keys`, with up to `in_flight` GETs open at once."""
    # TODO(ex14, step 2): keep `in_flight` requests open while the consumer reads: one request waits out
    # its latency alone, N of them overlap their waits. Bound it (the proxy counts the most it saw open),
    # hand the bytes on in the order of the keys whatever order they arrive in, and leave nothing running
    # behind you when the consumer stops early or a request fails.
    raise NotImplementedError("TODO(ex14, step 2) in exercises/ex14_remote_shards.py: fetch_in_flight (requests in flight)")


class ShardIndex:
    """Random access into the shards of one split, through its index."""

    def __init__(self, endpoint: Endpoint, bucket: str, index_key: str) -> None:
        # TODO(ex14, step 3): read the index once, here. Listing a bucket to find what is in it costs a
        # request per 1,000 keys, each dearer than a GET, every time: the index already says where every
        # sample is.
        raise NotImplementedError("TODO(ex14, step 3) in exercises/ex14_remote_shards.py: "
                                  "ShardIndex (an index, range reads)")

    def read(self, keys: Sequence[str]) -> list[RemoteSample]:
        """The samples with these keys, in this order, as RemoteSample(key, the .jpg bytes, label)."""
        # TODO(ex14, step 3): fetch only the bytes asked for, with Range requests; samples that sit next to
        # each other in a shard come in one request. Then ask what answer you got: a server that ignores
        # Range sends the whole shard with status 200, and its first bytes are not your sample.
        raise NotImplementedError("TODO(ex14, step 3) in exercises/ex14_remote_shards.py: "
                                  "ShardIndex.read (an index, range reads)")


class ShardCache:
    """Whole shards kept on local disk, within a byte budget, least recently used out first."""

    def __init__(self, endpoint: Endpoint, bucket: str, cache_dir: Path | str, budget_bytes: int) -> None:
        # TODO(ex14, step 4): keep what you need to know which shards are on disk, how many bytes they
        # take, and which was used longest ago. Several threads will call get() at once.
        raise NotImplementedError("TODO(ex14, step 4) in exercises/ex14_remote_shards.py: ShardCache (a local cache)")

    def get(self, shard_key: str) -> bytes:
        """The shard's bytes: from cache_dir when there, else fetched once and kept."""
        # TODO(ex14, step 4): a hit reads the file and marks the shard as just used; a miss fetches it, makes
        # room first (the budget holds on disk at every instant, not only after the write), then writes it. Two
        # threads missing the same shard at once must not both download it: the second waits for the first.
        raise NotImplementedError("TODO(ex14, step 4) in exercises/ex14_remote_shards.py: ShardCache.get (a local cache)")


# TODO(ex14, step 5): bad input. Every function above must fail loudly, and say where: a wrong secret, a
# bucket or key that does not exist, a server that is not running (how long does your client retry, and
# for how long does it wait?), a shard cut short, an index that points past its shard's end. A message
# like "SignatureDoesNotMatch" alone says what, not where: add the bucket or key and the endpoint's URL.
