"""Run Ray Data epochs on a local Ray cluster in the sandbox, a worker killed on purpose, and read what the ranks got.

    first, killed = run_ray_epochs([RayEpoch(), RayEpoch(kill_block=3)], folder)
    killed.visitation()        # how many samples arrived once, twice or more, or never
    killed.blocks_run()        # how many times each block's map task started

- **The parts.** One process, the driver (`loaderlab.raydata.driver`), calls `ray.init` (a head node of its own:
  the GCS, a raylet, an object store, `CLUSTER_CPUS` worker processes for tasks) and builds each epoch as
  `ray.data.range(num_samples)` in blocks of `block_size` keys, `map_batches` decoding and center-cropping each
  block's images (`loaderlab.images.reference_crop`, in the workers) and `streaming_split(world_size, equal=True)`,
  each split read by a rank, a thread of the driver, in batches of `batch_size`.
- **The fault.** With `kill_block`, the worker process running that block's first attempt SIGKILLs itself half way
  through the block (what the kernel's out-of-memory killer or a lost machine does to a worker); Ray Data retries a
  failed task `max_retries` times (Ray Data's own default, -1, without limit). Each attempt's start is written to the
  folder's attempts file by the task itself, so the count of runs per block is read, not inferred.
- **Loopback only.** Ray's processes listen on the node's address, the one a route to an outside address would leave
  from or, with no route, the host name's (`ray._private.services.get_node_ip_address`), and Ray has a history of
  unauthenticated APIs exposed on the network (CVE-2023-48022): the cluster runs only in `loaderlab.sandbox`, with
  `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` (the node address is then loopback, whatever the host name resolves to), usage
  statistics off and the dashboard not started (`loaderlab.raydata.driver.start_local_cluster`). HOME is `folder`'s
  `home` (Ray writes its authentication token under it), and Ray's session files go to a short temporary folder of
  the run (a Unix socket's path must stay under 108 bytes), removed after it (an owner killed leaves it, about 0.5 MB,
  as it leaves `folder`; its path is in `folder`'s RAY_TEMP_NOTE). `RayResult.listeners` and `.interfaces` are what
  the sandbox held meanwhile; where no sandbox can be made, `loaderlab.sandbox.unavailable()` says why and nothing is
  started.
- **Nothing left running.** The sandbox ends with the driver, its time limit and its owner (SIGKILL included); the
  kernel ends every process of its PID namespace, Ray's too. `RayResult.left_running` lists the processes still
  naming the run's temporary folder on their command line once the sandbox has ended (Ray's processes carry it on
  theirs): none is expected.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderlab.ledger import Visitation, ended_by_time_limit, epoch_ledger, read_json_lines, write_epochs
from loaderlab.paths import REPO_ROOT
from loaderlab.processes import naming
from loaderlab.sandbox import sandboxed

__all__ = ["RayEpoch", "RayResult", "run_ray_epochs"]

ATTEMPTS_FILE, DRIVER_LOG = "attempts.jsonl", "driver.log"
RAY_TEMP_NOTE = "ray-temp.txt"   # where the run's temporary folder is, for whoever cleans up after a killed owner
CLUSTER_CPUS = 2              # task slots of the local cluster: two map tasks at once, like two service workers
START_ALLOWANCE_S = 60.0      # ray.init and ray.shutdown: 7-12 s and 1-1.5 s on 2 cores (docs/module11-plan.md)
ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",   # Ray's ENABLE_RAY_CLUSTER off: the node's address is loopback
    "RAY_USAGE_STATS_ENABLED": "0",             # docs.ray.io, "Usage Stats Collection"
}
LOOPBACK_ADDRESSES = ("127.0.0.1", "::ffff:127.0.0.1", "::1")


@dataclass(frozen=True)
class RayEpoch:
    """One epoch: `num_samples` samples of the profile's train split (sample key k is image k % the split's size),
    in map tasks of `block_size` keys, split to `world_size` ranks that read batches of `batch_size`. `kill_block`:
    the worker running that block's first attempt SIGKILLs itself half way through it; `max_retries`: the map task's
    (Ray Data's default -1: retried without limit; 0: not retried). `timeout_s` bounds the epoch in the driver."""

    num_samples: int = 200
    block_size: int = 10
    batch_size: int = 8
    world_size: int = 2
    kill_block: int | None = None
    max_retries: int = -1
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        blocks = -(-self.num_samples // self.block_size)
        if self.kill_block is not None and not 0 <= self.kill_block < blocks:
            raise ValueError(f"kill_block {self.kill_block} is not a block of this epoch (0..{blocks - 1})")


@dataclass
class RayResult:
    """What one epoch delivered: the driver's exit status and the time its sandbox ran (shared by the epochs of one
    `run_ray_epochs`), the epoch's ledger (`batch` records with `rank`, `keys`, `labels`, `shape`, `dtype`; `event`
    records), every map-task attempt (`block`, `pid`, `t`, `killed`), the driver's log and what the sandbox held."""

    spec: RayEpoch
    returncode: int | None
    elapsed_s: float
    records: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    log: str
    listeners: list[tuple[str, int]]
    interfaces: list[str]
    timed_out: bool
    left_running: list[str]

    def batches(self, rank: int | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == "batch" and rank in (None, r["rank"])]

    def keys(self, rank: int | None = None) -> list[int]:
        """Every sample key received (by `rank`, or by every rank), in arrival order."""
        return [key for batch in self.batches(rank) for key in batch["keys"]]

    def visitation(self) -> Visitation:
        return Visitation.count(self.keys(), self.spec.num_samples)

    def event(self, name: str) -> dict[str, Any] | None:
        return next((r for r in self.records if r["kind"] == "event" and r["event"] == name), None)

    def blocks_run(self) -> Counter:
        """How many times each block's map task started."""
        return Counter(attempt["block"] for attempt in self.attempts)

    def retried_after_s(self) -> float | None:
        """Seconds from the killed attempt's end to the start of the block's next attempt, or None."""
        killed = next((a for a in self.attempts if a["killed"]), None)
        again = [a["t"] for a in self.attempts if killed and a["block"] == killed["block"] and not a["killed"]]
        return min(again) - killed["killed_at"] if again else None

    def cpu_ms_per_image(self) -> float:
        """The driver's CPU time (every thread) from the first batch of any rank to the epoch's end, per image
        received after that first batch: what receiving the crops cost it."""
        end = self.event("epoch ended")
        return 1000 * end["cpu_s"] / end["images"]

    def off_loopback(self) -> list[tuple[str, int]]:
        """The listeners seen on an address other than loopback (none expected)."""
        return [(address, port) for address, port in self.listeners if address not in LOOPBACK_ADDRESSES]

    def describe(self) -> str:
        """The events, the attempts and the end of the driver's log: what a failed assertion shows."""
        lines = [f"{r['event']}: {json.dumps({k: v for k, v in r.items() if k not in ('t', 'kind', 'event')})}"
                 for r in self.records if r["kind"] == "event"]
        lines += [f"attempt: block {a['block']}, pid {a['pid']}{', killed' if a['killed'] else ''}"
                  for a in self.attempts]
        return "\n".join([*lines, "--- driver log (last 20 lines) ---", *self.log.strip().splitlines()[-20:]])


def run_ray_epochs(specs: Sequence[RayEpoch], folder: Path) -> list[RayResult]:
    """Run the epochs of `specs` one after the other on one local Ray cluster in a sandbox (module docstring), their
    files in `folder`; each one's result. The sandbox is stopped START_ALLOWANCE_S past the sum of the epochs' limits.
    RuntimeError, saying why, where no sandbox can be made here."""
    write_epochs(folder, specs)
    (folder / ATTEMPTS_FILE).unlink(missing_ok=True)
    ray_temp = Path(tempfile.mkdtemp(prefix="loaderlab-ray-"))
    (folder / RAY_TEMP_NOTE).write_text(str(ray_temp))
    started = time.monotonic()
    try:
        with open(folder / DRIVER_LOG, "wb") as log, \
                sandboxed([sys.executable, "-m", "loaderlab.raydata.driver", str(folder), str(ray_temp)],
                          stdout=log, stderr=log, cwd=REPO_ROOT) as sandbox:
            watched = sandbox.watch(sum(spec.timeout_s for spec in specs) + START_ALLOWANCE_S)
        elapsed = time.monotonic() - started
        left_running = list(naming(ray_temp).values())
    finally:
        shutil.rmtree(ray_temp, ignore_errors=True)
    attempts = read_json_lines([folder / ATTEMPTS_FILE])
    log_text = (folder / DRIVER_LOG).read_text(errors="replace")
    results = []
    for number, spec in enumerate(specs):
        records = read_json_lines([epoch_ledger(folder, number)])
        timed_out = watched.timed_out or ended_by_time_limit(records)
        results.append(RayResult(spec, watched.returncode, elapsed, records,
                                 [a for a in attempts if a["epoch"] == number], log_text, watched.listeners,
                                 watched.interfaces, timed_out, left_running))
    return results
