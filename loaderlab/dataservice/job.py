"""Run a trainer fed by tf.data service on this machine, with a worker killed on purpose, and read what it received.

    result = run_service(ServiceSpec(workers=2, policy="DYNAMIC", kill_after=100), folder)
    result.visitation()        # how many samples arrived once, twice or more, or never
    result.cpu_ms_per_image()  # the trainer's own CPU time per image
    off, dynamic = run_services([ServiceSpec(policy="OFF"), ServiceSpec(policy="DYNAMIC")], folder)   # one cluster

- **The parts.** The trainer is a process of its own that only consumes batches (`loaderlab.dataservice.trainer`):
  its CPU time per image is what moving the decoding elsewhere takes off the host. With `workers=0` it decodes the
  images itself (a tf.data pipeline on its own cores); otherwise it reads from a tf.data service job: a dispatcher
  and `workers` workers (processes of `loaderlab.dataservice.servers`, the last of two or more in the dispatcher's)
  that read the files and, with `decode_in="workers"`, decode and crop them (the course's
  `loaderlab.tfdata.decode_center_crop`), or, with `decode_in="trainer"`, ship the encoded bytes for the trainer to
  decode.
- **Loopback only.** tf.data service's servers listen on every interface and run whatever dataset graph is
  registered with them, unauthenticated, so they run only in `loaderlab.sandbox`, where loopback is the only
  interface; `ServiceResult.listeners` and `.interfaces` are what the sandbox held meanwhile. Where no sandbox can be
  made, `sandbox_unavailable()` says why and nothing is started.
- **Nothing left running.** The sandbox ends with the trainer, with the time limit and with its owner (SIGKILL
  included): the kernel ends every process of its PID namespace, servers too.
- **Several epochs, one cluster.** `run_services(specs, folder)` reads the specs' epochs one after the other in one
  sandbox, from one dispatcher and its workers (as many as the most any spec asks for: every worker serves every job,
  so the specs that use the service should ask for the same count), each epoch's fault struck in its turn: every
  process that imports TensorFlow costs seconds to start, paid once here.
- **The ledger.** The trainer writes each batch's sample keys and labels as it receives them, and its events (the
  servers started, the fault, the end), one ledger per epoch; a worker killed with no one to start it again can leave
  the trainer waiting for it with no end, so such an epoch goes last, and its time limit ends the trainer.
- **Coordinated reads.** With `round_sides`, the epoch is read by `world_size` ranks, threads of the trainer, each
  taking `steps` batches of one shared job over an endless multi-scale stream (each round of `world_size`
  consecutive batches resized to one of `round_sides`, drawn at random), in strict round-robin (`consumer_index`,
  `num_consumers`) if `coordinated`, first come first served otherwise; `ServiceResult.step_sides()` is what each
  step of a synchronous job would have trained on (`loaderlab.dataservice.trainer.rounds_epoch`).
- **Exercise 17's ranks.** With `hooks` (a module's name, importable from `hooks_path`), the epoch is read by
  `world_size` ranks, threads of the trainer, through the module's `rank_plan`, `request_epoch` and `exactly_once`
  (`loaderlab.dataservice.trainer.ranks_epoch`); each batch is written with its rank, and an exception a hook raises
  as that rank's `rank failed` event.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from loaderlab.ledger import Visitation, ended_by_time_limit, epoch_ledger, read_json_lines, write_epochs
from loaderlab.paths import REPO_ROOT
from loaderlab.sandbox import sandboxed, unavailable as sandbox_unavailable

__all__ = ["ServiceResult", "ServiceSpec", "run_service", "run_services", "sandbox_unavailable"]

TRAINER_LOG = "trainer.log"
POLICIES = ("OFF", "DYNAMIC", "FILE", "DATA", "FILE_OR_DATA", "HINT")   # tf.data.experimental.service.ShardingPolicy


@dataclass(frozen=True)
class ServiceSpec:
    """One epoch for the trainer: `num_samples` samples of the profile's train split (sample key k is image
    k % the split's size), in batches of `batch_size`, decoded where `decode_in` says by `workers` service workers
    (0: no service, the trainer decodes), shared out by tf.data service's `policy`. `kill_after`: SIGKILL the first
    worker once that many samples have arrived, and start it again at its own address at once if `restart` (as a
    cluster manager would). `timeout_s` bounds the trainer's epoch; this side stops the sandbox then."""

    workers: int = 2
    decode_in: Literal["workers", "trainer"] = "workers"
    policy: str = "DYNAMIC"
    num_samples: int = 200
    batch_size: int = 8
    compression: str | None = None          # distribute()'s: None, "AUTO" or "SNAPPY"
    kill_after: int | None = None
    restart: bool = True
    timeout_s: float = 60.0
    hooks: str | None = None                # exercise 17: the module whose hooks the ranks call (`policy` unused)
    hooks_path: tuple[str, ...] = ()        # where that module is importable from
    world_size: int = 1                     # exercise 17 and coordinated reads: ranks, each a thread of the trainer
    measure_local: bool = False             # exercise 17: decode the epoch on the trainer first, for its CPU per image
    round_sides: tuple[int, ...] = ()       # coordinated reads: each round's batches resized to one of these
    coordinated: bool = False               # coordinated reads: strict round-robin, else first come first served
    steps: int = 12                         # coordinated reads: the batches each rank takes

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy {self.policy!r} is not one of tf.data service's: {', '.join(POLICIES)}")
        if self.workers < 0 or (self.workers == 0 and (self.decode_in != "trainer" or self.kill_after is not None)):
            raise ValueError("workers=0 means no service: the trainer decodes (decode_in='trainer') and no worker "
                             f"can be killed; got workers={self.workers}, decode_in={self.decode_in!r}, "
                             f"kill_after={self.kill_after}")
        if self.round_sides and (self.workers < 1 or self.world_size < 2 or self.steps < 1 or self.kill_after
                                 is not None or self.num_samples < self.batch_size):
            raise ValueError("a coordinated-reads epoch needs the service (workers >= 1), ranks to coordinate "
                             "(world_size >= 2), steps >= 1, no fault and a full batch of samples; got "
                             f"workers={self.workers}, world_size={self.world_size}, steps={self.steps}, "
                             f"kill_after={self.kill_after}, num_samples={self.num_samples}")


@dataclass
class ServiceResult:
    """What the trainer did in one epoch: the trainer's exit status and the time its sandbox ran (shared by the epochs
    of one `run_services`), the epoch's ledger (`batch` records with `keys` and `labels`, then `event` records), the
    logs and what the sandbox held meanwhile."""

    spec: ServiceSpec
    returncode: int | None
    elapsed_s: float
    records: list[dict[str, Any]]
    logs: dict[str, str]
    listeners: list[tuple[str, int]]
    interfaces: list[str]
    timed_out: bool = False

    def batches(self) -> list[dict[str, Any]]:
        return self.records_of("batch")

    def keys(self) -> list[int]:
        """Every sample key the trainer received, in arrival order."""
        return [key for batch in self.batches() for key in batch["keys"]]

    def visitation(self) -> Visitation:
        return Visitation.count(self.keys(), self.spec.num_samples)

    def event(self, name: str) -> dict[str, Any] | None:
        """The first `name` event, or None."""
        return next(iter(self.events(name)), None)

    def rank_batches(self, rank: int) -> list[dict[str, Any]]:
        """Rank `rank`'s batches in the order it yielded them (exercise 17's ranks: `keys`, `labels`, `shape`,
        `dtype`)."""
        return [r for r in self.batches() if r.get("rank") == rank]

    def step_sides(self) -> list[tuple[int, ...]]:
        """A coordinated-reads epoch: for each step, the image side of every rank's batch (rank 0 first), the steps
        that every rank took: what the replicas of one synchronous step train on."""
        sides = [[batch["shape"][1] for batch in self.rank_batches(rank)] for rank in range(self.spec.world_size)]
        return list(zip(*sides))

    def records_of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == kind]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == "event" and r["event"] == name]

    def cpu_ms_per_image(self) -> float:
        """The trainer's CPU time (every thread of its process) from its first batch to its last, per image received
        after the first batch: what consuming costs it, start-up left out."""
        end = self.event("epoch ended")
        return 1000 * end["cpu_s"] / end["images"]

    def images_per_s(self) -> float:
        """Images received per second of the trainer's wall-clock time, its first batch to its last."""
        end = self.event("epoch ended")
        return end["images"] / end["wall_s"]

    def describe(self) -> str:
        """The events and the end of each log: what a failed test shows."""
        start = min((r["t"] for r in self.records), default=0.0)
        lines = [f"{r['t'] - start:7.2f} s  {r['event']}" for r in self.records if r["kind"] == "event"]
        for name, text in sorted(self.logs.items()):
            tail = text.strip().splitlines()[-12:]
            lines += [f"--- {name} (last {len(tail)} lines) ---", *tail]
        return "\n".join(lines)


START_ALLOWANCE_S = 60.0    # the servers' and the trainer's start (importing TensorFlow), on top of the epochs' limits


def run_service(spec: ServiceSpec, folder: Path) -> ServiceResult:
    """Run `spec` in a sandbox, its files (spec, ledger, logs) in `folder`, and read what the trainer received.
    RuntimeError, saying why, where no sandbox can be made here."""
    return run_services([spec], folder)[0]


def run_services(specs: Sequence[ServiceSpec], folder: Path) -> list[ServiceResult]:
    """Run the epochs of `specs` one after the other in one sandbox, from one cluster (module docstring); each one's
    result. The sandbox is stopped START_ALLOWANCE_S past the sum of the epochs' own time limits."""
    write_epochs(folder, specs)
    started = time.monotonic()
    with open(folder / TRAINER_LOG, "wb") as log, \
            sandboxed([sys.executable, "-m", "loaderlab.dataservice.trainer", str(folder)],
                      stdout=log, stderr=log, cwd=REPO_ROOT) as sandbox:
        watched = sandbox.watch(sum(spec.timeout_s for spec in specs) + START_ALLOWANCE_S)
    elapsed = time.monotonic() - started
    logs = {path.stem: path.read_text(errors="replace") for path in sorted(folder.glob("*.log"))}
    results = []
    for number, spec in enumerate(specs):
        records = read_json_lines([epoch_ledger(folder, number)])
        timed_out = watched.timed_out or ended_by_time_limit(records)
        results.append(ServiceResult(spec, watched.returncode, elapsed, records, logs, watched.listeners,
                                     watched.interfaces, timed_out))
    return results
