"""The elastic job's own process, inside the sandbox: `python -m loaderlab.elastic.controller FOLDER`.

It holds the job's rendezvous store (a `TCPStore` that no node owns, so that losing a node does not lose the
rendezvous: torchrun's agents join it with `is_host=false`), starts one torchrun agent per node, strikes the spec's
faults when the ledger shows their step begun, writes a timeline (`events.jsonl`), and ends when every agent has
ended or the job's time limit has passed (then it stops them all). Its exit status: 0 when every agent that was not
killed on purpose ended with 0, else the first other status (124 past the time limit).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
from torch.distributed import TCPStore

from loaderlab.elastic.job import CHECKPOINT_FILE, EVENTS_FILE, LEDGER_FOLDER, SPEC_FILE, Fault, JobSpec, read_ledger
from loaderlab.processes import stop_processes

POLL_S = 0.02            # how often the controller reads the ledger for a fault's step and looks at the agents
STOP_GRACE_S = 3.0       # SIGTERM to SIGKILL, for agents past the time limit
TIMED_OUT = 124
# A fresh store for the ranks of every attempt. By default the agent of node rank 0 keeps one store for the ranks of
# all attempts (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, `next_rendezvous`), and gloo's keys of a
# finished attempt stay in it: after a restart a rank read a dead peer's address there, and connecting to it failed
# until the restarts ran out (seen here on the first try with a rank killed, torch 2.14.1).
AGENT_ENVIRONMENT = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


class Timeline:
    """The controller's events, one JSON line each, with the wall-clock time (the ranks' ledger uses it too)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", buffering=1)

    def add(self, event: str, **fields: Any) -> None:
        self._file.write(json.dumps({"t": time.time(), "event": event, **fields}) + "\n")


def agent_command(spec: JobSpec, folder: Path, store_port: int) -> list[str]:
    """One node: a torchrun agent joining the job's rendezvous on 127.0.0.1 as a guest (`is_host=false`)."""
    conf = (f"is_host=false,join_timeout={spec.join_timeout_s},last_call_timeout={spec.last_call_timeout_s},"
            f"keep_alive_interval={spec.keep_alive_interval_s},keep_alive_max_attempt={spec.keep_alive_max_attempt}")
    return [sys.executable, "-m", "torch.distributed.run",
            f"--nnodes={spec.min_nodes or spec.nodes}:{spec.nodes}", f"--nproc-per-node={spec.procs_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{store_port}", "--rdzv-id=elastic-job",
            f"--rdzv-conf={conf}", f"--max-restarts={spec.max_restarts}",
            f"--monitor-interval={spec.monitor_interval_s}", "--local-addr=127.0.0.1",
            "-m", "loaderlab.elastic.rank", str(folder)]


def ranks_begun(folder: Path) -> list[dict[str, Any]]:
    """The ledger's `begin` records: the steps the ranks have begun."""
    return [r for r in read_ledger(folder) if r["kind"] == "begin"]


def strike(fault: Fault, begun: list[dict[str, Any]], agents: list[subprocess.Popen], timeline: Timeline) -> bool:
    """Strike `fault` if a rank has begun its step; True once struck. A hang is the rank's own (`rank`)."""
    if fault.kind == "hang_rank":
        return True
    due = [r for r in begun if r["step"] >= fault.at_step]
    if not due:
        return False
    if fault.kind == "kill_rank":
        victims = [r for r in due if r["rank"] == fault.rank]
        if not victims:
            return False
        os.kill(victims[0]["pid"], signal.SIGKILL)
        timeline.add(f"rank {fault.rank} killed (SIGKILL) at step {victims[0]['step']}", pid=victims[0]["pid"])
        return True
    agent = psutil.Process(agents[fault.node].pid)
    if fault.kind == "kill_agent":
        agent.kill()
        timeline.add(f"node {fault.node}: its agent alone killed (SIGKILL) at step {due[0]['step']}")
        return True
    members = [*agent.children(recursive=True), agent]
    for member in members:
        try:
            member.kill()
        except psutil.NoSuchProcess:
            pass
    timeline.add(f"node {fault.node} lost: its agent and {len(members) - 1} processes killed (SIGKILL) "
                 f"at step {due[0]['step']}")
    return True


def control(folder: Path) -> int:
    spec = JobSpec.from_json((folder / SPEC_FILE).read_text())
    (folder / LEDGER_FOLDER).mkdir(exist_ok=True)
    (folder / CHECKPOINT_FILE).unlink(missing_ok=True)
    timeline = Timeline(folder / EVENTS_FILE)
    store = TCPStore("127.0.0.1", 0, is_master=True, multi_tenant=True, wait_for_workers=False,
                     timeout=timedelta(seconds=spec.join_timeout_s))
    timeline.add(f"rendezvous store listening on port {store.port}")
    agents = []
    for node in range(spec.nodes):
        log = open(folder / f"node{node}.log", "wb")
        agents.append(subprocess.Popen(agent_command(spec, folder, store.port), stdout=log, stderr=subprocess.STDOUT,
                                       env={**os.environ, **AGENT_ENVIRONMENT}))
        timeline.add(f"node {node}: torchrun agent started", pid=agents[-1].pid)
    pending, killed = list(spec.faults), set()
    deadline = time.monotonic() + spec.timeout_s
    while any(agent.poll() is None for agent in agents):
        if time.monotonic() > deadline:
            timeline.add(f"time limit: the job ran past {spec.timeout_s:g} s; every agent stopped")
            stop_processes(agents, STOP_GRACE_S)
            return TIMED_OUT
        if pending:
            begun = ranks_begun(folder)
            for fault in list(pending):
                if strike(fault, begun, agents, timeline):
                    pending.remove(fault)
                    if fault.kind in ("kill_node", "kill_agent"):
                        killed.add(fault.node)
        time.sleep(POLL_S)
    for node, agent in enumerate(agents):
        timeline.add(f"node {node}: agent ended with status {agent.returncode}")
    statuses = [agent.returncode for node, agent in enumerate(agents) if node not in killed]
    return next((status for status in statuses if status), 0)


if __name__ == "__main__":
    sys.exit(control(Path(sys.argv[1])))
