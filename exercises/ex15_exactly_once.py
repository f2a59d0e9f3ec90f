"""Exercise 15: exactly once, over a flaky network, on every rank.

Exercise 14 read the store over a network that delays and paces but never fails. A real one fails: a request is
answered 503 SlowDown (the store asks you to slow down), a body stops half way (the connection dropped after the
headers). An SDK retries the first kind itself, and not the second: the exception comes out of the body's read, long
after the request "succeeded". Retry wrongly and you lose a sample, or deliver it twice, or make the throttling
worse. Then a training job runs one loader per rank: a rank with one batch fewer leaves the others waiting in their
next collective, forever. And a job killed mid-epoch must resume with exactly the rest, twice in a row.

The proxy between you and the server (`loaderlab.storage.netem`) injects the faults, replayably, and counts every
request, GET, byte, SlowDown and drop, per key and over time; those counters, not your code's own, are what the grader
reads. The data is the one of exercise 14: tar shards with an index, `shards/<split>/index.json`, whose "samples"
list gives every sample's key, label, shard key, and the offset and size of its image bytes in that shard.

Build it in steps; each TODO names its step, and `pytest grader/test_ex15_exactly_once.py` shows each step's status:
  1 exactly once under faults (TODO(ex15, step 1))    2 503 is back-pressure (TODO(ex15, step 2))
  3 equal batches per rank (TODO(ex15, step 3))       4 resume, twice (TODO(ex15, step 4))
  5 bad input (TODO(ex15, step 5))
Hints: `make hint EX=ex15` (LEVEL=1 to 5, from a nudge to nearly the answer).

Contract (the grader checks each point; [n] is the step that checks it):
- [1] `read_object` returns the object's bytes (or the bytes of `byte_range`, both ends included), exactly: a
  503 SlowDown or a failed connection is retried, and a body cut short is resumed with `Range` from the first byte
  not yet received (the proxy counts the bytes it sent: the object's own, not more);
- [1] a body that stops sending without closing (a stall) is abandoned once nothing has come for `read_timeout_s`
  (not sooner, and soon after: not the SDK's default of a minute) and resumed like a cut one, still exactly;
- [1] before retry n (n = 1, 2, ...) it waits a random time of at most min(`max_delay_s`, `base_delay_s` x 2^(n-1))
  ("full jitter": waits grow exponentially, and calls retrying at once, from any threads, do not wait the same
  times); it never makes more than `max_attempts` attempts per call, however many bytes each attempt delivered
  before it failed, and then raises an error naming the key and why (the last failure);
- [2] `read_objects` yields each object's bytes in the order of the keys given, with at most `max_in_flight`
  requests open; it treats SlowDown as back-pressure: after a burst of them its request rate falls (no retry storm:
  from 1 s after the first SlowDown, at most 2.5x the rate the store admits) and when they stop it comes back up
  (within 3 s, above 2.5x the rate the store admitted, over some 0.5 s); an object that fails past every attempt
  raises out of the iteration, naming its key;
- [3] `RemoteEpochs` splits each epoch over `world_size` ranks and `num_workers` reader threads per rank (at most
  `num_workers` requests open), whatever the number of shards: every rank yields the same number of batches
  (`len()` says how many), of `batch_size` samples (the last may be short, the same on every rank), including a
  rank that gets no whole shard; together the
  ranks yield every sample at least once, and the fewest repeats that even them out (at most `world_size` - 1:
  the documented padding); each sample is a `RemoteSample` whose `data` is `bytes` and `label` an `int`; the order
  depends on (seed, epoch) alone: not on `num_workers`, not on the run, not on the process (its pid, its hash seed:
  every rank is a process of its own, started by fork or spawn);
- [3] under the `flaky` profile's faults, `RemoteEpochs` yields every sample of the epoch exactly once per planned
  slot (the padding's repeats are planned), in the order the same epoch has without faults, with at most 1.3x the
  requests of that fault-free epoch; a read that fails past every attempt raises out of the iteration, naming the
  shard: never an epoch with a sample silently missing, never a loop left waiting;
- [3] on real ranks joined by gloo, each rank running a collective after every batch, none is left waiting;
- [4] `state_dict()` returns a new dict of plain data (it goes through json) that holds the position of the samples
  THE TRAINING LOOP HAS RECEIVED; after `load_state_dict`, iteration yields exactly the rest of that epoch, and a
  state saved after a resume resumes exactly again (twice, three times...), also with another `num_workers`; a
  state saved after the epoch's last batch resumes to an empty rest (not a new epoch, not an error);
- [4] a resumed epoch reads only what is left (the proxy's byte count: at most 10% over the remaining samples' own);
- [5] bad input raises, within 20 s, an error whose message names what and where: wrong credentials, a missing
  bucket or key, or no server at the endpoint (the bucket or key and the endpoint's URL); a 403 or 404 is not
  retried; `load_state_dict` refuses with ValueError, before changing anything, a state saved for another dataset
  (another index), for another epoch than the one `set_epoch` chose, or that is malformed.
"""

from __future__ import annotations

import json  # noqa: F401  (you will need these)
import random  # noqa: F401
import threading  # noqa: F401
import time  # noqa: F401
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from loaderlab.storage.server import Endpoint


@dataclass(frozen=True)
class RetryPolicy:
    """How one request is retried (the grader varies every field)."""

    max_attempts: int = 6        # attempts per call, the first included
    base_delay_s: float = 0.05   # the wait before retry n is at most min(max_delay_s, base_delay_s * 2 ** (n - 1))
    max_delay_s: float = 1.0
    read_timeout_s: float = 10.0  # an answer that sends nothing this long is abandoned (as a cut body: resumed)


class RemoteSample(NamedTuple):
    """One sample read from the store."""

    key: str     # the sample's key, as the index says ("circles/circles_000003")
    data: bytes  # the image file's bytes, as stored
    label: int


def read_object(endpoint: Endpoint, bucket: str, key: str, retry: RetryPolicy = RetryPolicy(),
                byte_range: tuple[int, int] | None = None) -> bytes:
    """The object's bytes (or bytes byte_range[0]..byte_range[1], both included), whatever the network does."""
    # TODO(ex15, step 1): a request can fail before its answer (503 SlowDown, a refused connection) or half way
    # through its body (your read raises). Which failures are worth another attempt, and which never get better?
    # When a body stops at byte k, what do you still need, and how do you ask for only that? Wait before each
    # retry, longer each time and never the same as everyone else; stop after max_attempts and say why. And a body
    # that just stops sending, without closing: how long does your client wait on it (botocore: 60 s by default)?
    raise NotImplementedError("TODO(ex15, step 1) in exercises/ex15_exactly_once.py: read_object "
                              "(exactly once under faults)")


def read_objects(endpoint: Endpoint, bucket: str, keys: Sequence[str], max_in_flight: int,
                 retry: RetryPolicy = RetryPolicy()) -> Iterator[bytes]:
    """Each object's bytes in the order of `keys`, with up to `max_in_flight` requests open, slowing down when asked."""
    # TODO(ex15, step 2): a 503 SlowDown from a store is not bad luck, it is the store saying "too many": every
    # client that retries at once, as fast as before, keeps it overloaded (a retry storm). Send fewer requests
    # after SlowDowns, and more again once they stop; the proxy draws your request rate over time.
    raise NotImplementedError("TODO(ex15, step 2) in exercises/ex15_exactly_once.py: read_objects (503 is back-pressure)")


class RemoteEpochs:
    """One rank's batches (lists of RemoteSample) of a split's samples, read from its shards through the index."""

    def __init__(self, endpoint: Endpoint, bucket: str, index_key: str, batch_size: int, *, world_size: int = 1,
                 rank: int = 0, num_workers: int = 1, seed: int = 0, retry: RetryPolicy = RetryPolicy()) -> None:
        # TODO(ex15, step 3): read the index once; the epoch starts at 0, with nothing received. Refuse a rank
        # outside [0, world_size) and sizes below 1.
        raise NotImplementedError("TODO(ex15, step 3) in exercises/ex15_exactly_once.py: RemoteEpochs "
                                  "(equal batches per rank)")

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration follows (every rank calls it with the same value)."""
        # TODO(ex15, step 3): remember it; the order of an epoch depends on (seed, epoch) alone.
        raise NotImplementedError("TODO(ex15, step 3) in exercises/ex15_exactly_once.py: set_epoch "
                                  "(equal batches per rank)")

    def __len__(self) -> int:
        # TODO(ex15, step 3): batches per epoch, the same on every rank.
        raise NotImplementedError("TODO(ex15, step 3) in exercises/ex15_exactly_once.py: __len__ "
                                  "(equal batches per rank)")

    def __iter__(self) -> Iterator[list[RemoteSample]]:
        # TODO(ex15, step 3): plan the epoch first, the same plan on every rank without any talking: which samples
        # does rank r read, in which order, and what fills the shortfall when the count does not divide? A rank
        # whose share is a piece of one shard reads that piece (Range), not the shard. Then read this rank's share
        # with num_workers threads, in the plan's order, through the retries of step 1.
        raise NotImplementedError("TODO(ex15, step 3) in exercises/ex15_exactly_once.py: __iter__ "
                                  "(equal batches per rank)")

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is in the epoch: what a checkpoint saves."""
        # TODO(ex15, step 4): count what the training loop has received, in the epoch, not since the last resume: a
        # state frozen at the stream's start (huggingface/datasets#8308) sends the second resume back to the start;
        # a state counting only since the last resume sends it back by what the first run received.
        raise NotImplementedError("TODO(ex15, step 4) in exercises/ex15_exactly_once.py: state_dict (resume, twice)")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume where `state` was saved: the next iteration yields the rest of its epoch."""
        # TODO(ex15, steps 4, 5): the next iteration starts at the first sample the loop had not received, reading
        # only what is left. Before changing anything, check that the state is of this dataset and this epoch.
        raise NotImplementedError("TODO(ex15, step 4) in exercises/ex15_exactly_once.py: load_state_dict "
                                  "(resume, twice)")


# TODO(ex15, step 5): bad input. A wrong secret, a bucket or key that does not exist, a server that is not
# running: which of them does your retry loop retry, and for how long? Fail within seconds, and say where:
# add the bucket or key and the endpoint's URL to what the client raised.
