"""tf.data service's servers, as processes inside the sandbox:

    python -m loaderlab.dataservice.servers dispatcher PORT [--static-workers N] [--worker WORKER_PORT]
    python -m loaderlab.dataservice.servers worker DISPATCHER_PORT PORT

A worker process serves one worker; the dispatcher's process serves the dispatcher and, with `--worker`, one worker
beside it. `start_cluster` puts the last of two or more workers there: every process imports TensorFlow first
(seconds each on 2 cores), and only worker 0 is ever killed on purpose (`loaderlab.dataservice.trainer.Fault`), so
worker 0 always has a process of its own. They bind every interface (TensorFlow 2.21 gives them no address to bind,
`docs/module11-plan.md`), so they run only in `loaderlab.sandbox`, where loopback is the only interface; there a fixed
port is free, which a static sharding policy needs (the dispatcher must know every worker's address before the job
starts, and a restarted worker must come back at its own). A server runs until its process is killed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

# A dispatcher drops a worker whose heartbeat it has not had for WORKER_TIMEOUT_MS; workers beat every
# HEARTBEAT_INTERVAL_MS. TensorFlow's defaults are left to its runtime; these short ones let a restart be seen within
# seconds on one machine.
WORKER_TIMEOUT_MS = 2000
HEARTBEAT_INTERVAL_MS = 500
DISPATCHER_PORT = 5050     # the workers take the ports after it; inside the sandbox's own network every port is free
SERVICE = f"grpc://localhost:{DISPATCHER_PORT}"


def start_cluster(logs: Path, workers: int, fixed_addresses: bool = False) -> list[subprocess.Popen]:
    """Start a dispatcher and `workers` workers, worker k at its own port; the processes of workers 0, 1, ... in that
    order, the last of two or more being the dispatcher's (module docstring). `fixed_addresses`: every worker's
    address fixed in the dispatcher, which a static sharding policy needs. Each process writes to its log in
    `logs`."""
    beside = workers - 1 if workers >= 2 else None   # the worker that serves in the dispatcher's process
    arguments = ["dispatcher", str(DISPATCHER_PORT), "--static-workers", str(workers if fixed_addresses else 0)]
    if beside is None:
        _start(logs, "dispatcher", arguments)
        return [start_worker(logs, number) for number in range(workers)]
    dispatcher = _start(logs, f"dispatcher-and-worker-{_worker_port(beside)}",
                        [*arguments, "--worker", str(_worker_port(beside))])
    return [*(start_worker(logs, number) for number in range(beside)), dispatcher]


def start_worker(logs: Path, number: int) -> subprocess.Popen:
    """Worker `number`'s own process (0, 1, ...), at its own port: started again, it comes back at the same address."""
    port = str(_worker_port(number))
    return _start(logs, f"worker-{port}", ["worker", str(DISPATCHER_PORT), port])


def _worker_port(number: int) -> int:
    return DISPATCHER_PORT + 1 + number


def _start(logs: Path, name: str, arguments: list[str]) -> subprocess.Popen:
    log = open(logs / f"{name}.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "loaderlab.dataservice.servers", *arguments],
                            stdout=log, stderr=subprocess.STDOUT)


def local_address(port: int) -> str:
    """Where a server of this sandbox answers: its port on loopback."""
    return f"localhost:{port}"


def serve(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderlab.dataservice.servers")
    roles = parser.add_subparsers(dest="role", required=True)
    dispatcher = roles.add_parser("dispatcher")
    dispatcher.add_argument("port", type=int)
    dispatcher.add_argument("--static-workers", type=int, default=0,
                            help="the worker ports that follow the dispatcher's, for a static sharding policy")
    dispatcher.add_argument("--worker", type=int, metavar="WORKER_PORT",
                            help="also serve a worker at this port, in this process")
    worker = roles.add_parser("worker")
    worker.add_argument("dispatcher_port", type=int)
    worker.add_argument("port", type=int)
    options = parser.parse_args(argv)

    from tensorflow.data.experimental import service

    servers = []
    if options.role == "dispatcher":
        fixed = [local_address(options.port + 1 + i) for i in range(options.static_workers)] or None
        servers.append(service.DispatchServer(service.DispatcherConfig(
            port=options.port, worker_addresses=fixed, worker_timeout_ms=WORKER_TIMEOUT_MS)))
        print(f"dispatcher serving on port {options.port}", flush=True)
        if options.worker is not None:
            servers.append(_worker(service, options.port, options.worker))
    else:
        servers.append(_worker(service, options.dispatcher_port, options.port))
    for server in servers:   # each serves until the process is killed: the first join never returns
        server.join()


def _worker(service: Any, dispatcher_port: int, port: int) -> Any:
    """A started WorkerServer of `service` (tf.data.experimental.service) at `port`."""
    server = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=local_address(dispatcher_port), port=port, worker_address=local_address(port),
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS))
    print(f"worker serving on port {port}", flush=True)
    return server


if __name__ == "__main__":
    serve(sys.argv[1:])
