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
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from loaderlab.dataservice.job import LEDGER_FILE, SPEC_FILE, ServiceSpec
from loaderlab.images import list_samples
from loaderlab.paths import dataset_dir

DISPATCHER_PORT = 5050     # the workers take the ports after it; inside the sandbox's own network every port is free
TIMED_OUT = 124


class Ledger:
    """The trainer's records, one JSON line each, written as they happen (a process killed keeps what came before)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", buffering=1)

    def add(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"t": time.time(), "kind": kind, **fields}) + "\n")

    def event(self, event: str, **fields: Any) -> None:
        self.add("event", event=event, **fields)


def start_server(folder: Path, *arguments: str) -> subprocess.Popen:
    log = open(folder / f"{arguments[0]}-{arguments[-1]}.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "loaderlab.dataservice.servers", *arguments],
                            stdout=log, stderr=subprocess.STDOUT)


def epoch_dataset(spec: ServiceSpec, paths: list[str], labels: list[int]):
    """The epoch as tf.data: (keys, labels, uint8 crops) in batches of `batch_size`, decoded where the spec says."""
    import tensorflow as tf

    from loaderlab.tfdata import decode_center_crop

    files, classes = tf.constant(paths), tf.constant(labels, tf.int64)
    read = tf.data.Dataset.range(spec.num_samples).map(
        lambda key: (key, tf.gather(classes, key), tf.io.read_file(tf.gather(files, key))))
    decode = lambda key, label, data: (key, label, decode_center_crop(data))   # noqa: E731
    if spec.workers == 0:
        return read.map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(spec.batch_size).prefetch(2)
    if spec.decode_in == "workers":
        read = read.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    served = read.batch(spec.batch_size).apply(tf.data.experimental.service.distribute(
        processing_mode=getattr(tf.data.experimental.service.ShardingPolicy, spec.policy),
        service=f"grpc://localhost:{DISPATCHER_PORT}", compression=spec.compression))
    if spec.decode_in == "trainer":
        served = served.unbatch().map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(spec.batch_size)
    return served.prefetch(2)


def train(folder: Path) -> int:
    spec = ServiceSpec.from_json((folder / SPEC_FILE).read_text())
    ledger = Ledger(folder / LEDGER_FILE)
    samples = list_samples(dataset_dir() / "train")
    chosen = [samples[key % len(samples)] for key in range(spec.num_samples)]
    static = spec.policy not in ("OFF", "DYNAMIC")
    if spec.workers:
        start_server(folder, "dispatcher", str(DISPATCHER_PORT), "--static-workers", str(spec.workers * static))
        workers = [start_server(folder, "worker", str(DISPATCHER_PORT), str(DISPATCHER_PORT + 1 + i))
                   for i in range(spec.workers)]
        ledger.event("servers started", workers=[w.pid for w in workers])
    dataset = epoch_dataset(spec, [str(s.path) for s in chosen], [s.label for s in chosen])

    def time_limit() -> None:
        ledger.event("time limit", after_s=spec.timeout_s)
        os._exit(TIMED_OUT)

    watchdog = threading.Timer(spec.timeout_s, time_limit)
    watchdog.daemon = True
    watchdog.start()
    received, first = 0, None
    for keys, labels, images in dataset:
        if first is None:   # from here on the trainer only consumes: its CPU time is what it pays per image
            first = (time.perf_counter(), time.process_time(), received + len(keys))
            ledger.event("first batch")
        received += len(keys)
        ledger.add("batch", keys=keys.numpy().tolist(), labels=labels.numpy().tolist(), shape=list(images.shape))
        if spec.kill_after is not None and received >= spec.kill_after and "killed" not in locals():
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait()
            killed = True
            ledger.event("worker 0 killed", received=received)
            if spec.restart:
                workers[0] = start_server(folder, "worker", str(DISPATCHER_PORT), str(DISPATCHER_PORT + 1))
                ledger.event("worker 0 started again", pid=workers[0].pid)
    watchdog.cancel()
    wall, cpu, counted = (time.perf_counter() - first[0], time.process_time() - first[1],
                          received - first[2]) if first else (0.0, 0.0, 0)
    ledger.event("epoch ended", received=received, images=counted, wall_s=wall, cpu_s=cpu)
    return 0


if __name__ == "__main__":
    sys.exit(train(Path(sys.argv[1])))
