"""The trainer's process, inside the sandbox: `python -m loaderlab.dataservice.trainer FOLDER`.

It starts the servers once (a dispatcher and as many workers as the most any epoch asks for, processes of
`loaderlab.dataservice.servers`: worker 0 in one of its own, the last of two or more in the dispatcher's), then reads
the folder's epochs one after the other from them (or decodes the images itself for an epoch with no workers),
strikes each epoch's fault, and writes each epoch's ledger: every batch's keys and labels as it arrives, and the
events. The workers' addresses are fixed in the dispatcher whatever the policies, so that a static policy can run
beside the others. A watchdog ends the process with status 124 (`time limit` in the epoch's ledger) once an epoch has
run its `timeout_s`: a trainer waiting for a lost worker can wait forever, so an epoch that may wait goes last.

An epoch with `round_sides` is read by `world_size` ranks, threads of this process, from one shared job
(`rounds_epoch`: coordinated reads). An epoch with `hooks` (exercise 17) is read by `world_size` ranks, each a thread
of this process calling the hooks module (`ranks_epoch`). The process ends with `os._exit` once the ledgers are written: a job the hooks abandoned
leaves a thread blocked inside TensorFlow, which the interpreter's exit would wait for.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from loaderlab.dataservice.job import ServiceSpec
from loaderlab.dataservice.servers import SERVICE, start_cluster, start_worker
from loaderlab.images import CROP, Sample, list_samples, mean_abs_difference, reference_crop
from loaderlab.ledger import TIME_LIMIT, Ledger, epoch_ledger, read_epochs
from loaderlab.paths import dataset_dir

TIMED_OUT = 124
READY_WITHIN_S = 60.0   # for every worker to register with the dispatcher (each imports TensorFlow first)
PIXEL_EVERY = 7         # exercise 17's ranks: the crop of every 7th key is compared with the reference after the epoch


class Fault:
    """An epoch's fault: worker 0's process (its own: `start_cluster`) SIGKILLed once `spec.kill_after` samples have
    arrived (counted over every rank), then started again at its own address if `spec.restart` (`workers[0]`
    replaced)."""

    def __init__(self, spec: ServiceSpec, folder: Path, ledger: Ledger, workers: list) -> None:
        self.spec, self.folder, self.ledger, self.workers = spec, folder, ledger, workers
        self.received, self._struck, self._lock = 0, False, threading.Lock()

    def arrived(self, count: int) -> None:
        with self._lock:
            self.received += count
            if self.spec.kill_after is None or self._struck or self.received < self.spec.kill_after:
                return
            self._struck = True
            self.workers[0].send_signal(signal.SIGKILL)
            self.workers[0].wait()
            self.ledger.event("worker 0 killed", received=self.received)
            if self.spec.restart:
                self.workers[0] = start_worker(self.folder, 0)
                self.ledger.event("worker 0 started again", pid=self.workers[0].pid)


def _chosen(spec: ServiceSpec, samples: list[Sample]) -> tuple[list[str], list[int]]:
    """The epoch's paths and labels: sample key k is image k % the split's size."""
    chosen = [samples[key % len(samples)] for key in range(spec.num_samples)]
    return [str(s.path) for s in chosen], [s.label for s in chosen]


def _watchdog(spec: ServiceSpec, ledger: Ledger) -> threading.Timer:
    """Started: ends the process with TIMED_OUT once the epoch has run `spec.timeout_s`."""
    def time_limit() -> None:
        ledger.event(TIME_LIMIT, after_s=spec.timeout_s)
        os._exit(TIMED_OUT)

    watchdog = threading.Timer(spec.timeout_s, time_limit)
    watchdog.daemon = True
    watchdog.start()
    return watchdog


def train_epoch(spec: ServiceSpec, samples: list[Sample], ledger: Ledger, folder: Path, workers: list) -> None:
    """One epoch of `spec` over `samples` (the train split), read and written to `ledger`; its fault struck on
    `workers`."""
    from loaderlab.dataservice.pipeline import served_epoch

    paths, labels = _chosen(spec, samples)
    dataset = served_epoch(paths, labels, list(range(spec.num_samples)), spec.batch_size,
                           service=SERVICE if spec.workers else None, policy=spec.policy, decode_in=spec.decode_in,
                           compression=spec.compression)
    fault = Fault(spec, folder, ledger, workers)
    watchdog = _watchdog(spec, ledger)
    received, first = 0, None
    for keys, labels, images in dataset:
        if first is None:   # from here on the trainer only consumes: its CPU time is what it pays per image
            first = (time.perf_counter(), time.process_time(), received + len(keys))
            ledger.event("first batch")
        received += len(keys)
        ledger.add("batch", keys=keys.numpy().tolist(), labels=labels.numpy().tolist(), shape=list(images.shape))
        fault.arrived(len(keys))
    watchdog.cancel()
    wall, cpu, counted = (time.perf_counter() - first[0], time.process_time() - first[1],
                          received - first[2]) if first else (0.0, 0.0, 0)
    ledger.event("epoch ended", received=received, images=counted, wall_s=wall, cpu_s=cpu)


def ranks_epoch(spec: ServiceSpec, samples: list[Sample], ledger: Ledger, folder: Path, workers: list) -> None:
    """Exercise 17's epoch: `spec.world_size` ranks, threads of this process, each reading its share through the
    hooks module: `rank_plan(num_samples, rank, world_size, batch_size)` gives its keys and batch sizes (written as
    `plan`), then its batches come from `exactly_once(request, keys, sizes)`, `request(keys)` being the module's
    `request_epoch` over those keys at this sandbox's dispatcher. Every batch is written as it arrives (with its
    rank, keys, labels, shape and dtype); the trainer's CPU time and the images are counted from the first batch of
    any rank to the end (`epoch ended`: the jobs' start-up left out, as `train_epoch` leaves it out); once every rank
    has ended, the crop of every PIXEL_EVERY-th key is compared with the reference (`pixels`), so that it costs the
    epoch nothing. With `measure_local`, the trainer first decodes the epoch itself (`decoded here`: its CPU seconds),
    the figure its CPU per image in the ranks' epoch is set against."""
    import numpy as np

    from loaderlab.dataservice.pipeline import served_epoch

    paths, labels = _chosen(spec, samples)
    sys.path[:0] = list(spec.hooks_path)
    hooks = importlib.import_module(spec.hooks)
    if spec.measure_local:
        started = time.process_time()
        images = sum(len(keys) for keys, _, _ in served_epoch(paths, labels, list(range(spec.num_samples)),
                                                               spec.batch_size, service=None))
        ledger.event("decoded here", images=images, cpu_s=time.process_time() - started)
    fault = Fault(spec, folder, ledger, workers)
    kept: dict[int, np.ndarray] = {}
    first: list[tuple[float, float, int]] = []   # at the first batch of any rank: wall, CPU, images before it
    first_lock = threading.Lock()

    def request(rank: int, keys: list[int]) -> object:
        keys = [int(key) for key in keys]
        ledger.event("job requested", rank=rank, keys=len(keys))
        return hooks.request_epoch(SERVICE, [paths[k] for k in keys], [labels[k] for k in keys], keys,
                                   spec.batch_size)

    def read(rank: int) -> None:
        try:
            keys, sizes = hooks.rank_plan(spec.num_samples, rank, spec.world_size, spec.batch_size)
            ledger.add("plan", rank=rank, keys=[int(k) for k in keys], sizes=[int(n) for n in sizes])
            for batch_keys, batch_labels, images in hooks.exactly_once(lambda wanted: request(rank, wanted), keys,
                                                                      sizes):
                with first_lock:
                    if not first:   # from here on the ranks consume: the CPU time per image counts from here
                        first.append((time.perf_counter(), time.process_time(), fault.received))
                batch_keys, images = np.asarray(batch_keys).tolist(), np.asarray(images)
                ledger.add("batch", rank=rank, keys=batch_keys, labels=np.asarray(batch_labels).tolist(),
                           shape=list(images.shape), dtype=str(images.dtype))
                for row, key in enumerate(batch_keys):
                    if key % PIXEL_EVERY == 0 and row < len(images):
                        kept[key] = images[row]
                fault.arrived(len(batch_keys))
            ledger.event("rank ended", rank=rank)
        except BaseException as error:   # a hook's failure is the rank's, written for the grader to read
            ledger.event("rank failed", rank=rank, error=f"{type(error).__name__}: {error}"[:2000],
                         traceback=traceback.format_exc()[-4000:])

    ranks = [threading.Thread(target=read, args=(rank,), name=f"rank-{rank}", daemon=True)
             for rank in range(spec.world_size)]
    watchdog = _watchdog(spec, ledger)
    started, cpu_started = time.perf_counter(), time.process_time()
    for thread in ranks:
        thread.start()
    for thread in ranks:
        thread.join()
    watchdog.cancel()
    wall, cpu, before = first[0] if first else (started, cpu_started, 0)
    ledger.event("epoch ended", received=fault.received, images=fault.received - before,
                 wall_s=time.perf_counter() - wall, cpu_s=time.process_time() - cpu)
    for key, image in sorted(kept.items()):
        shape_right = image.shape == (CROP, CROP, 3) and image.dtype == np.uint8
        ledger.add("pixels", key=key, shape=list(image.shape), dtype=str(image.dtype),
                   difference=mean_abs_difference(image, reference_crop(paths[key])) if shape_right else None)


def rounds_epoch(spec: ServiceSpec, samples: list[Sample], ledger: Ledger, folder: Path, workers: list) -> None:
    """Coordinated reads against stragglers: `spec.world_size` ranks, threads of this process, each take `spec.steps`
    batches of one job (its own name) over `pipeline.multiscale_rounds`, an endless stream of rounds of
    `world_size` consecutive batches of one side, each round's drawn at random from `spec.round_sides` by the worker
    that makes it; in strict round-robin (`consumer_index`, `num_consumers`) if `spec.coordinated`, first come first
    served otherwise. The dataset is registered once and each rank reads the job by its id, as separate trainer
    processes would. Every batch is written as it arrives, with its rank and step. Nothing ends the job (its stream is
    endless) once the ranks have their steps; the epochs after it in the same cluster ran as before (notebook 11b's
    section 3). `workers` is not used (no fault)."""
    import tensorflow as tf

    from loaderlab.dataservice.pipeline import multiscale_rounds

    paths, labels = _chosen(spec, samples)
    service = tf.data.experimental.service
    dataset = multiscale_rounds(paths, labels, list(range(spec.num_samples)), spec.batch_size, spec.round_sides,
                                spec.world_size)
    dataset_id = service.register_dataset(SERVICE, dataset)
    job = f"rounds-{time.monotonic_ns()}"
    received = [0] * spec.world_size

    def read(rank: int) -> None:
        coordinated = {"consumer_index": rank, "num_consumers": spec.world_size} if spec.coordinated else {}
        try:
            stream = service.from_dataset_id(service.ShardingPolicy.OFF, SERVICE, dataset_id, dataset.element_spec,
                                             job_name=job, **coordinated)
            for step, (keys, classes, images) in enumerate(stream.take(spec.steps)):
                ledger.add("batch", rank=rank, step=step, keys=keys.numpy().tolist(),
                           labels=classes.numpy().tolist(), shape=list(images.shape))
                received[rank] += len(keys)
            ledger.event("rank ended", rank=rank)
        except BaseException as error:   # written for the reader of the ledger; the epoch's end says the rest
            ledger.event("rank failed", rank=rank, error=f"{type(error).__name__}: {error}"[:2000])

    ranks = [threading.Thread(target=read, args=(rank,), name=f"rank-{rank}", daemon=True)
             for rank in range(spec.world_size)]
    watchdog = _watchdog(spec, ledger)
    for thread in ranks:
        thread.start()
    for thread in ranks:
        thread.join()
    watchdog.cancel()
    ledger.event("epoch ended", received=sum(received))


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
    specs = read_epochs(folder, ServiceSpec)
    samples = list_samples(dataset_dir() / "train")
    ledgers = [Ledger(epoch_ledger(folder, number)) for number in range(len(specs))]
    most = max(spec.workers for spec in specs)
    workers = []
    if most:
        workers = start_cluster(folder, most, fixed_addresses=True)
        ledgers[0].event("servers started", workers=[w.pid for w in workers])
        wait_for_workers(most, samples[0], ledgers[0])
    for spec, ledger in zip(specs, ledgers):
        epoch = ranks_epoch if spec.hooks else rounds_epoch if spec.round_sides else train_epoch
        epoch(spec, samples, ledger, folder, workers)
    return 0


if __name__ == "__main__":
    code = train(Path(sys.argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # the module docstring: an abandoned job's thread would hold the interpreter's exit
