"""The trainer's process, inside the sandbox: `python -m loaderlab.dataservice.trainer FOLDER`.

It starts the servers once (a dispatcher and as many workers as the most any epoch asks for, each a process of
`loaderlab.dataservice.servers`), then reads the folder's epochs one after the other from them (or decodes the images
itself for an epoch with no workers), strikes each epoch's fault, and writes each epoch's ledger: every batch's keys
and labels as it arrives, and the events. The workers' addresses are fixed in the dispatcher whatever the policies,
so that a static policy can run beside the others. A watchdog ends the process with status 124 (`time limit` in the
epoch's ledger) once an epoch has run its `timeout_s`: a trainer waiting for a lost worker can wait forever, so an
epoch that may wait goes last.
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

from loaderlab.dataservice.job import ServiceSpec, ledger_file, read_specs
from loaderlab.dataservice.servers import SERVICE, start_dispatcher, start_worker
from loaderlab.images import Sample, list_samples
from loaderlab.paths import dataset_dir

TIMED_OUT = 124
READY_WITHIN_S = 60.0   # for every worker to register with the dispatcher (each imports TensorFlow first)


class Ledger:
    """An epoch's records, one JSON line each, written as they happen (a process killed keeps what came before)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", buffering=1)

    def add(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"t": time.time(), "kind": kind, **fields}) + "\n")

    def event(self, event: str, **fields: Any) -> None:
        self.add("event", event=event, **fields)


def train_epoch(spec: ServiceSpec, samples: list[Sample], ledger: Ledger, folder: Path, workers: list) -> None:
    """One epoch of `spec` over `samples` (the train split), read and written to `ledger`; its fault struck on
    `workers` (worker 0 replaced in the list when started again)."""
    from loaderlab.dataservice.pipeline import served_epoch

    chosen = [samples[key % len(samples)] for key in range(spec.num_samples)]
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


def wait_for_workers(count: int, sample: Sample, ledger: Ledger) -> None:
    """Return once `count` workers serve jobs: an `OFF` job over one sample yields one copy per registered worker. A
    job started earlier may find fewer (measured: an `OFF` epoch begun too soon delivered one copy of the epoch, not
    two)."""
    from loaderlab.dataservice.pipeline import served_epoch

    deadline = time.monotonic() + READY_WITHIN_S
    while sum(1 for _ in served_epoch([str(sample.path)], [sample.label], [0], 1, service=SERVICE,
                                      policy="OFF")) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} workers registered within {READY_WITHIN_S:g} s")
        time.sleep(0.2)
    ledger.event("workers ready", workers=count)


def train(folder: Path) -> int:
    specs = read_specs(folder)
    samples = list_samples(dataset_dir() / "train")
    ledgers = [Ledger(ledger_file(folder, number)) for number in range(len(specs))]
    most = max(spec.workers for spec in specs)
    workers = []
    if most:
        start_dispatcher(folder, static_workers=most)
        workers = [start_worker(folder, number) for number in range(most)]
        ledgers[0].event("servers started", workers=[w.pid for w in workers])
        wait_for_workers(most, samples[0], ledgers[0])
    for spec, ledger in zip(specs, ledgers):
        train_epoch(spec, samples, ledger, folder, workers)
    return 0


if __name__ == "__main__":
    sys.exit(train(Path(sys.argv[1])))
