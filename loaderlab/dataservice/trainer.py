"""The trainer's process, inside the sandbox: `python -m loaderlab.dataservice.trainer FOLDER`.

It starts the spec's servers (a dispatcher and its workers, each a process of `loaderlab.dataservice.servers`), reads
one epoch of batches from them (or decodes the images itself when the spec has no workers), strikes the spec's fault,
and writes the ledger: each batch's keys and labels as it arrives, and its events. A watchdog ends it with status 124
(`time limit` in the ledger) once the epoch has run `timeout_s`: a trainer waiting for a lost worker can wait forever.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from loaderlab.dataservice.job import LEDGER_FILE, SPEC_FILE, ServiceSpec
from loaderlab.dataservice.servers import SERVICE, start_dispatcher, start_worker
from loaderlab.images import list_samples
from loaderlab.paths import dataset_dir

TIMED_OUT = 124


class Ledger:
    """The trainer's records, one JSON line each, written as they happen (a process killed keeps what came before)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", buffering=1)

    def add(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"t": time.time(), "kind": kind, **fields}) + "\n")

    def event(self, event: str, **fields: Any) -> None:
        self.add("event", event=event, **fields)


def train(folder: Path) -> int:
    spec = ServiceSpec.from_json((folder / SPEC_FILE).read_text())
    ledger = Ledger(folder / LEDGER_FILE)
    samples = list_samples(dataset_dir() / "train")
    chosen = [samples[key % len(samples)] for key in range(spec.num_samples)]
    static = spec.policy not in ("OFF", "DYNAMIC")
    if spec.workers:
        start_dispatcher(folder, spec.workers * static)
        workers = [start_worker(folder, number) for number in range(spec.workers)]
        ledger.event("servers started", workers=[w.pid for w in workers])
    from loaderlab.dataservice.pipeline import served_epoch   # TensorFlow's import: after the servers started

    dataset = served_epoch([str(s.path) for s in chosen], [s.label for s in chosen], list(range(spec.num_samples)),
                           spec.batch_size, service=SERVICE if spec.workers else None, policy=spec.policy,
                           decode_in=spec.decode_in, compression=spec.compression)

    def time_limit() -> None:
        ledger.event("time limit", after_s=spec.timeout_s)
        os._exit(TIMED_OUT)

    watchdog = threading.Timer(spec.timeout_s, time_limit)
    watchdog.daemon = True
    watchdog.start()
    received, first, killed = 0, None, False
    for keys, labels, images in dataset:
        if first is None:   # from here on the trainer only consumes: its CPU time is what it pays per image
            first = (time.perf_counter(), time.process_time(), received + len(keys))
            ledger.event("first batch")
        received += len(keys)
        ledger.add("batch", keys=keys.numpy().tolist(), labels=labels.numpy().tolist(), shape=list(images.shape))
        if spec.kill_after is not None and received >= spec.kill_after and not killed:
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait()
            killed = True
            ledger.event("worker 0 killed", received=received)
            if spec.restart:
                workers[0] = start_worker(folder, 0)
                ledger.event("worker 0 started again", pid=workers[0].pid)
    watchdog.cancel()
    wall, cpu, counted = (time.perf_counter() - first[0], time.process_time() - first[1],
                          received - first[2]) if first else (0.0, 0.0, 0)
    ledger.event("epoch ended", received=received, images=counted, wall_s=wall, cpu_s=cpu)
    return 0


if __name__ == "__main__":
    sys.exit(train(Path(sys.argv[1])))
