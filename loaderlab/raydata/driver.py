"""The driver's process, inside the sandbox: `python -m loaderlab.raydata.driver FOLDER RAY_TEMP`.

It starts a local Ray cluster (`start_local_cluster`, as the league's Ray Data entry does), reads the folder's epochs
one after the other (`loaderlab.raydata.job`'s module docstring), writes each epoch's ledger, and stops Ray. The map
tasks write their own attempts. An epoch whose ranks have not all ended once it has run its `timeout_s` ends the
process with status 124 (`time limit` in the epoch's ledger): a rank can wait with no end for a split whose producer
failed, so an epoch that may fail goes last.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from loaderlab.images import list_samples, reference_crop
from loaderlab.ledger import TIME_LIMIT, Ledger, epoch_ledger, read_epochs
from loaderlab.paths import dataset_dir
from loaderlab.raydata.job import ATTEMPTS_FILE, CLUSTER_CPUS, ENVIRONMENT, RayEpoch

TIMED_OUT = 124
OBJECT_STORE_BYTES = 200 * 2**20   # an epoch of 224x224x3 crops in flight is a few MB; Ray's floor is 75 MiB


def decode_block(batch: dict[str, np.ndarray], *, folder: str, epoch: int, spec: dict[str, Any], paths: list[str],
                 labels: list[int]) -> dict[str, np.ndarray]:
    """A map task: the crops and labels of one block's keys (`batch["id"]`), its attempt written first. The first
    attempt at `spec["kill_block"]` SIGKILLs its own worker process half way through the block."""
    keys = batch["id"]
    block = int(keys[0]) // spec["block_size"]
    attempt = {"epoch": epoch, "block": block, "pid": os.getpid(), "t": time.time(), "killed": False}
    dies = spec["kill_block"] == block and _first_to_claim(Path(folder) / f"killed-{epoch}")
    if not dies:
        _write_attempt(folder, attempt)
    images = []
    for row, key in enumerate(keys):
        if dies and row == len(keys) // 2:
            _write_attempt(folder, attempt | {"killed": True, "killed_at": time.time()})
            os.kill(os.getpid(), signal.SIGKILL)
        images.append(reference_crop(paths[int(key)]))
    return {"key": keys, "label": np.array([labels[int(k)] for k in keys], dtype=np.int64), "image": np.stack(images)}


def _first_to_claim(marker: Path) -> bool:
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def _write_attempt(folder: str, attempt: dict[str, Any]) -> None:
    with open(Path(folder) / ATTEMPTS_FILE, "a") as attempts:
        attempts.write(json.dumps(attempt) + "\n")


def read_epoch(number: int, spec: RayEpoch, folder: Path, ledger: Ledger, paths: list[str], labels: list[int]) -> None:
    """Epoch `number`: its dataset split to `spec.world_size` ranks (threads), each batch written as it arrives;
    the driver's CPU time counted from the first batch of any rank."""
    import ray

    chosen = [paths[k % len(paths)] for k in range(spec.num_samples)]
    dataset = ray.data.range(spec.num_samples, override_num_blocks=-(-spec.num_samples // spec.block_size))
    with warnings.catch_warnings():
        # Ray 2.60 takes a map task's max_retries only among `ray_remote_args`, which it deprecates (to be removed in
        # 2.64) for named parameters that do not include it yet.
        warnings.simplefilter("ignore", DeprecationWarning)
        dataset = dataset.map_batches(decode_block, batch_size=spec.block_size, max_retries=spec.max_retries,
                                      fn_kwargs={"folder": str(folder), "epoch": number, "spec": asdict(spec),
                                                 "paths": chosen,
                                                 "labels": [labels[k % len(labels)] for k in range(spec.num_samples)]})
    splits = dataset.streaming_split(spec.world_size, equal=True)
    first: list[tuple[float, float, int]] = []
    received = [0]
    lock = threading.Lock()

    def read(rank: int) -> None:
        try:
            for batch in splits[rank].iter_batches(batch_size=spec.batch_size):
                with lock:
                    if not first:
                        first.append((time.perf_counter(), time.process_time(), received[0]))
                    received[0] += len(batch["key"])
                ledger.add("batch", rank=rank, keys=batch["key"].tolist(), labels=batch["label"].tolist(),
                           shape=list(batch["image"].shape), dtype=str(batch["image"].dtype))
            ledger.event("rank ended", rank=rank)
        except BaseException as error:   # what the rank saw, for the notebook to read
            ledger.event("rank failed", rank=rank, error=f"{type(error).__name__}: {error}"[:2000],
                         traceback=traceback.format_exc()[-3000:])

    ranks = [threading.Thread(target=read, args=(rank,), name=f"rank-{rank}", daemon=True)
             for rank in range(spec.world_size)]
    deadline = time.monotonic() + spec.timeout_s
    for thread in ranks:
        thread.start()
    for thread in ranks:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            ledger.event(TIME_LIMIT, after_s=spec.timeout_s)
            sys.stdout.flush()
            os._exit(TIMED_OUT)
    wall, cpu, before = first[0] if first else (time.perf_counter(), time.process_time(), 0)
    ledger.event("epoch ended", received=received[0], images=received[0] - before,
                 wall_s=time.perf_counter() - wall, cpu_s=time.process_time() - cpu)


def start_local_cluster(ray_temp: Path, home: Path) -> None:
    """Start a local Ray cluster from this process, which must run inside `loaderlab.sandbox` and not have imported
    ray yet: `ENVIRONMENT` and HOME (`home`: Ray writes its authentication token under it) set first, since Ray reads
    them as it is imported and its processes inherit them; then `ray.init` with no dashboard, `CLUSTER_CPUS` task
    slots, OBJECT_STORE_BYTES of object store and Ray's session files in `ray_temp` (short: a Unix socket's path in it
    must stay under 108 bytes), its workers' logs kept from this process's output, Ray Data's progress bars off."""
    if "ray" in sys.modules:
        raise RuntimeError("ray was imported before start_local_cluster: Ray read its environment without "
                           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, so its node address may not be loopback")
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update({**ENVIRONMENT, "HOME": str(home)})
    import ray

    ray.init(num_cpus=CLUSTER_CPUS, include_dashboard=False, object_store_memory=OBJECT_STORE_BYTES,
             _temp_dir=str(ray_temp), log_to_driver=False, logging_level=logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False


def drive(folder: Path, ray_temp: Path) -> int:
    specs = read_epochs(folder, RayEpoch)
    ledgers = [Ledger(epoch_ledger(folder, number)) for number in range(len(specs))]
    samples = list_samples(dataset_dir() / "train")
    paths, labels = [str(s.path) for s in samples], [s.label for s in samples]
    started = time.perf_counter()
    start_local_cluster(ray_temp, folder / "home")
    import ray

    ledgers[0].event("ray started", init_s=time.perf_counter() - started, version=ray.__version__,
                     node_address=ray.util.get_node_ip_address())
    for number, (spec, ledger) in enumerate(zip(specs, ledgers)):
        read_epoch(number, spec, folder, ledger, paths, labels)
    started = time.perf_counter()
    ray.shutdown()
    ledgers[-1].event("ray stopped", shutdown_s=time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(drive(Path(sys.argv[1]), Path(sys.argv[2])))
