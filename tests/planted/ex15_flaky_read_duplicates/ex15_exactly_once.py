"""Planted defect: each piece is streamed with boto3 and its samples handed on as their bytes arrive; a body cut
short restarts the piece from its start, so the samples it had already handed on come again (the sample-level twin
of `curl --retry-all-errors` into a pipe)."""

import random
import time

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403

CHUNK_BYTES = 256 * 1024
_CLIENTS = {}


class RemoteEpochs(_honest.RemoteEpochs):
    def read_samples(self, entries):
        client = _CLIENTS.get(self.endpoint)
        if client is None:
            client = _CLIENTS[self.endpoint] = self.endpoint.client(retries={"total_max_attempts": 1})
        for piece in _honest.pieces_of(entries):
            first, last = piece[0], piece[-1]
            byte_range = f"bytes={first.offset}-{last.offset + last.size - 1}"
            for attempt in range(self.retry.max_attempts):
                try:
                    body = client.get_object(Bucket=self.bucket, Key=first.shard, Range=byte_range)["Body"]
                    data, pending = bytearray(), list(piece)
                    while pending:
                        chunk = body.read(CHUNK_BYTES)
                        if not chunk:
                            raise OSError(f"{first.shard} {byte_range}: the body ended early")
                        data += chunk
                        while pending and len(data) >= pending[0].offset - first.offset + pending[0].size:
                            entry = pending.pop(0)
                            start = entry.offset - first.offset
                            yield RemoteSample(entry.key, bytes(data[start:start + entry.size]), entry.label)
                    break
                except Exception:
                    if attempt == self.retry.max_attempts - 1:
                        raise
                    time.sleep(random.uniform(0, self.retry.base_delay_s * 2 ** attempt))
                    # planted: the piece starts again from its first sample, handed on already
