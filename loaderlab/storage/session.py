"""The course's object store as one piece: the S3 server, the course's data in it, and the emulating proxy in front.

What module 10's checks, its notebook, the league and the test run each need is the same three things together;
`storage_session()` assembles them once, and `StorageSession` is what every one of them holds:

    with storage_session(network_profile="region") as storage:
        client = storage.endpoint.client()           # through the proxy (what a learner's reader is given)
        train = storage.dataset.splits["train"]      # the typed index (loaderlab.storage.bucket.RemoteSplit)
        storage.network.stats()                      # what the proxy counted

The server is the one this run was given (`shared_server`: announced in LOADERLAB_S3_* variables, or `make
storage`'s), else one of the session's own; the data is uploaded unless the bucket already holds it
(`upload_dataset`); the proxy is the session's own. Leaving the block stops what the session started, in the
reverse order, even when the block raised.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from loaderlab.paths import active_profile
from loaderlab.storage.bucket import RemoteDataset, RemoteSplit, upload_dataset
from loaderlab.storage.netem import Network, NetworkProfile, Stats, emulated_network
from loaderlab.storage.server import Endpoint, shared_server


@dataclass(frozen=True)
class StorageSession:
    """The S3 server, a dataset profile in it, and the emulating proxy in front of it."""

    server: Endpoint          # the server itself: what uploads and inspections use, past the proxy
    dataset: RemoteDataset    # the course's data in the server, with its typed index
    network: Network          # the proxy: its profile can be changed (`use`) and its counters read (`stats`)

    @property
    def endpoint(self) -> Endpoint:
        """The server through the proxy: the same keys at the proxy's URL (what readers under test are given)."""
        return self.server.through(self.network.url)

    @property
    def bucket(self) -> str:
        return self.dataset.bucket

    def split(self, name: str) -> RemoteSplit:
        return self.dataset.splits[name]

    def stats(self) -> Stats:
        return self.network.stats()


@contextmanager
def storage_session(network_profile: NetworkProfile | str = "loopback",
                    profile: str | None = None) -> Iterator[StorageSession]:
    """The run's S3 server with the dataset `profile` (default: the active profile) in it, and a proxy of this
    session's own with `network_profile` in front; all of it stopped (what this session started) on exit."""
    with shared_server() as server:
        dataset = upload_dataset(server, profile or active_profile())
        with emulated_network(server, network_profile) as network:
            yield StorageSession(server, dataset, network)
