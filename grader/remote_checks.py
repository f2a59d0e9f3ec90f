"""What the checks graded against the course's S3 server share (exercises 14 and 15): how long bad input may take
to raise, a port where no server listens, and the checks' own reads of the stored bytes, past the proxy."""

from __future__ import annotations

import functools
import socket
from typing import Any

from loaderlab.storage.server import Endpoint
from loaderlab.storage.session import StorageSession

# An error for bad input (wrong credentials, a missing bucket or object, no server, a failure past every attempt)
# must come within this: a client left to its default retries does not (obstore's retries a server that is not
# running for minutes).
ERROR_TIMEOUT_S = 20.0


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@functools.lru_cache(maxsize=4)
def _client(server: Endpoint) -> Any:
    return server.client()


def stored_bytes(storage: StorageSession, key: str) -> bytes:
    """An object's bytes in the session's bucket, read from the server direct (what the proxy counts is the
    learner's alone)."""
    return _client(storage.server).get_object(Bucket=storage.bucket, Key=key)["Body"].read()
