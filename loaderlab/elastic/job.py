"""Run an elastic training job under torchrun on this machine, with failures on purpose, and read what it trained.

    result = run_job(JobSpec(hooks="ex16_elastic_epochs", path=("exercises",), faults=(Fault("kill_rank", 5),)),
                     folder)
    result.committed_samples()   # every step that counts, in (step, rank) order, with its samples

- **The job.** `nodes` torchrun agents (each a node of `procs_per_node` ranks) join one c10d rendezvous whose store is
  a process of the job, not of a node (`controller`): so a node can be lost without the job, and with
  `min_nodes < nodes` torchrun restarts the ranks on the nodes that remain. Every rank runs `loaderlab.elastic.rank`,
  which trains over the epoch that the hooks module (exercise 16's API) plans, and checkpoints through it.
- **Loopback only.** torchrun's stores listen on every interface whatever address they are given
  (docs/module11-plan.md), so the whole job runs in `loaderlab.sandbox`, where loopback is the only interface;
  `JobResult.listeners` and `JobResult.interfaces` are what the sandbox held while the job ran. Where no sandbox can be
  made, `sandbox_unavailable()` says why and no job is started.
- **Nothing left running.** The sandbox ends with the job, with its time limit, and with its owner (SIGKILL included):
  the kernel ends every process of its PID namespace.
- **The ledger.** Every rank writes what it does as JSON lines (`Record` kinds below); `JobResult.attempts()` groups
  them by attempt (one torchrun start of the ranks: the first, and one per restart), and `committed_samples()` keeps
  the steps that count: those up to the checkpoint the next attempt loaded (work after the last checkpoint is lost
  with the crash and trained again), and every step of the last attempt.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from loaderlab.ledger import read_json_lines
from loaderlab.paths import REPO_ROOT
from loaderlab.sandbox import sandboxed, unavailable as sandbox_unavailable

__all__ = ["Attempt", "Fault", "JobResult", "JobSpec", "run_job", "sandbox_unavailable"]

FaultKind = Literal["kill_rank", "kill_node", "kill_agent", "hang_rank"]
SPEC_FILE, EVENTS_FILE, LEDGER_FOLDER, CHECKPOINT_FILE = "spec.json", "events.jsonl", "ledger", "checkpoint.pt"
STOP_MARGIN_S = 15.0       # past the job's own time limit, the host side stops the sandbox itself


@dataclass(frozen=True)
class Fault:
    """A failure on purpose, once a job, when a rank first begins global step `at_step` (counted over the epoch,
    across attempts):
    - `kill_rank`: SIGKILL to the rank `rank` (from the controller, outside the rank);
    - `kill_node`: SIGKILL to the agent of node `node` and every rank it started, together (a machine lost);
    - `kill_agent`: SIGKILL to the agent of node `node` alone (a launcher killed by hand or by a job scheduler): its
      ranks live on without it, and the sandbox ends them with the job;
    - `hang_rank`: the rank `rank` stops before the step and never returns (a stuck read, a dead filesystem)."""

    kind: FaultKind
    at_step: int
    rank: int = 0
    node: int = 1


@dataclass(frozen=True)
class JobSpec:
    """One job: the hooks module the ranks import (by name, from `path` first), the epoch it trains, its shape,
    torchrun's settings and the faults. `timeout_s` bounds the whole job, restarts included."""

    hooks: str
    path: tuple[str, ...] = ()
    num_samples: int = 96
    batch_size: int = 4
    seed: int = 0
    epoch: int = 0
    dataset: str = "elastic-demo"
    nodes: int = 2
    min_nodes: int | None = None
    procs_per_node: int = 1
    max_restarts: int = 2
    checkpoint_every: int = 2
    step_time_s: float = 0.02
    slow_input: tuple[int, float] | None = None    # (rank, seconds): that rank's input arrives this much later each step
    faults: tuple[Fault, ...] = ()
    timeout_s: float = 120.0
    # The c10d rendezvous: a round closes `last_call_timeout` s after its fewest nodes joined; a node silent for
    # keep_alive_interval * keep_alive_max_attempt s is dropped from it (torch's defaults: 30, 5 and 3). With 1 s x 2,
    # a living node was dropped in 2 of 6 jobs with a hung rank on the 2-core development machine (likely its
    # heartbeat came late): the other node then opened a new round alone and waited in it until its join timeout,
    # while the living one, seeing no node waiting, never restarted its ranks. With 1 s x 5: none in 3 such jobs and
    # 4 with a node lost (the restart on one rank 8.7 s after the kill, against 5 s with 1 s x 2).
    join_timeout_s: int = 60
    last_call_timeout_s: int = 1
    keep_alive_interval_s: int = 1
    keep_alive_max_attempt: int = 5
    monitor_interval_s: float = 0.2

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        fields = json.loads(text)
        return cls(**{**fields, "path": tuple(fields["path"]), "faults": tuple(Fault(**f) for f in fields["faults"]),
                      "slow_input": tuple(fields["slow_input"]) if fields["slow_input"] else None})


@dataclass
class Attempt:
    """One start of the ranks by torchrun: its world size, the checkpoint it began from (step and position of the
    epoch; 0 and 0 for none), the samples each rank began to train in each step (and, for the steps it finished, when:
    `step_times`, from its `begin` to its end), the checkpoints it committed (and how long each save took), and when each rank's process was created,
    reached the script's first line, joined the group and loaded the checkpoint (`starts`: rank -> those four times)."""

    key: int
    world_size: int
    loaded_step: int
    loaded_position: int
    started_s: float
    ranks: set[int] = field(default_factory=set)
    steps: dict[tuple[int, int], list[int]] = field(default_factory=dict)    # (step, rank) -> samples, once begun
    step_times: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    committed: list[tuple[int, int]] = field(default_factory=list)           # (step, position), in order
    save_s: list[float] = field(default_factory=list)
    starts: dict[int, tuple[float, float, float, float]] = field(default_factory=dict)
    ended_ranks: set[int] = field(default_factory=set)

    def steps_of(self, rank: int) -> list[int]:
        return sorted(step for step, r in self.steps if r == rank)


@dataclass
class JobResult:
    """What a job did: its exit status (0: every agent ended well), the time it took, the ranks' ledger, the
    controller's timeline, the logs (by name: `controller`, `node0`, ...) and what the sandbox held meanwhile."""

    returncode: int | None
    elapsed_s: float
    records: list[dict[str, Any]]
    events: list[dict[str, Any]]
    logs: dict[str, str]
    listeners: list[tuple[str, int]]
    interfaces: list[str]
    timed_out: bool = False

    def attempts(self) -> list[Attempt]:
        """The ledger grouped by attempt, in the order they started."""
        attempts: dict[int, Attempt] = {}
        begun: dict[tuple[int, int, int], float] = {}
        for record in sorted(self.records, key=lambda r: r["t"]):
            key = record["attempt"]
            if record["kind"] == "start":
                attempt = attempts.setdefault(key, Attempt(key, record["world"], record["loaded_step"],
                                                           record["loaded_position"], record["t"]))
                attempt.ranks.add(record["rank"])
                attempt.starts[record["rank"]] = (record["created_t"], record["main_t"], record["joined_t"],
                                                  record["t"])
                continue
            attempt = attempts.get(key)
            if attempt is None:
                continue
            if record["kind"] == "begin":
                attempt.steps[(record["step"], record["rank"])] = record["samples"]
                begun[(key, record["step"], record["rank"])] = record["t"]
            elif record["kind"] == "step":
                attempt.step_times[(record["step"], record["rank"])] = (
                    begun[(key, record["step"], record["rank"])], record["t"])
            elif record["kind"] == "commit":
                attempt.committed.append((record["step"], record["position"]))
                attempt.save_s.append(record["save_s"])
            elif record["kind"] == "end":
                attempt.ended_ranks.add(record["rank"])
        return sorted(attempts.values(), key=lambda a: a.started_s)

    def committed_samples(self) -> list[tuple[int, int, list[int]]]:
        """(step, rank, samples) of every step that counts, in (step, rank) order: each attempt's steps up to the step
        of the checkpoint the next attempt loaded, and every step of the last attempt."""
        counted = [(step, rank, samples) for _, step, rank, samples in self._counted()]
        return sorted(counted, key=lambda item: item[:2])

    def counted_steps_per_rank(self) -> list[dict[int, int]]:
        """For each attempt, in order: how many of its steps that count each of its ranks trained."""
        counts: dict[int, dict[int, int]] = {}   # _counted goes attempt by attempt, in order
        for attempt, _, rank, _ in self._counted():
            counts.setdefault(attempt.key, {}).setdefault(rank, 0)
            counts[attempt.key][rank] += 1
        return list(counts.values())

    def _counted(self) -> list[tuple[Attempt, int, int, list[int]]]:
        attempts = self.attempts()
        return [(attempt, step, rank, samples)
                for attempt, following in zip(attempts, [*attempts[1:], None])
                for (step, rank), samples in attempt.steps.items()
                if following is None or step <= following.loaded_step]

    def timeline(self) -> list[tuple[float, str]]:
        """(seconds since the job started, what happened): the controller's events and each attempt's first step."""
        start = min((e["t"] for e in self.events), default=0.0)
        lines = [(e["t"] - start, e["event"]) for e in self.events]
        for attempt in self.attempts():
            lines.append((attempt.started_s - start, f"attempt on {attempt.world_size} ranks started at step "
                                                     f"{attempt.loaded_step}, position {attempt.loaded_position}"))
        return sorted(lines)

    def describe(self) -> str:
        """The timeline and the end of each log: what a failed check shows."""
        lines = [f"{t:7.2f} s  {what}" for t, what in self.timeline()]
        for name, text in sorted(self.logs.items()):
            tail = text.strip().splitlines()[-12:]
            lines += [f"--- {name} (last {len(tail)} lines) ---", *tail]
        return "\n".join(lines)


def run_job(spec: JobSpec, folder: Path) -> JobResult:
    """Run `spec` in a sandbox, its files (spec, ledger, checkpoint, logs) in `folder`, and read what it did.
    RuntimeError, saying why, where no sandbox can be made here."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SPEC_FILE).write_text(spec.to_json())
    started = time.monotonic()
    with open(folder / "controller.log", "wb") as log, \
            sandboxed([sys.executable, "-m", "loaderlab.elastic.controller", str(folder)],
                      stdout=log, stderr=log, cwd=REPO_ROOT) as sandbox:
        watched = sandbox.watch(spec.timeout_s + STOP_MARGIN_S)
    elapsed = time.monotonic() - started
    events = read_json_lines([folder / EVENTS_FILE])
    timed_out = watched.timed_out or any(e["event"].startswith("time limit") for e in events)
    return JobResult(watched.returncode, elapsed, read_ledger(folder),
                     events, {path.stem: path.read_text(errors="replace") for path in sorted(folder.glob("*.log"))},
                     watched.listeners, watched.interfaces, timed_out)


def read_ledger(folder: Path) -> list[dict[str, Any]]:
    """Every record the ranks of the job in `folder` have written so far (`loaderlab.elastic.rank`)."""
    return read_json_lines(sorted((folder / LEDGER_FOLDER).glob("*.jsonl")))

