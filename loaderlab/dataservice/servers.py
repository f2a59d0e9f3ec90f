"""One tf.data service server per process, inside the sandbox:

    python -m loaderlab.dataservice.servers dispatcher PORT [--static-workers N]
    python -m loaderlab.dataservice.servers worker DISPATCHER_PORT PORT

Both bind every interface (TensorFlow 2.21 gives them no address to bind, `docs/module11-plan.md`), so they run only in
`loaderlab.sandbox`, where loopback is the only interface; there a fixed port is free, which a static sharding policy
needs (the dispatcher must know every worker's address before the job starts, and a restarted worker must come back
at its own). A server runs until it is killed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# A dispatcher drops a worker whose heartbeat it has not had for WORKER_TIMEOUT_MS; workers beat every
# HEARTBEAT_INTERVAL_MS. TensorFlow's defaults are left to its runtime; these short ones let a restart be seen within
# seconds on one machine.
WORKER_TIMEOUT_MS = 2000
HEARTBEAT_INTERVAL_MS = 500
DISPATCHER_PORT = 5050     # the workers take the ports after it; inside the sandbox's own network every port is free
SERVICE = f"grpc://localhost:{DISPATCHER_PORT}"


def start_dispatcher(logs: Path, static_workers: int = 0) -> subprocess.Popen:
    """The dispatcher's process (`static_workers`: the worker addresses a static sharding policy fixes)."""
    return _start(logs, "dispatcher", str(DISPATCHER_PORT), "--static-workers", str(static_workers))


def start_worker(logs: Path, number: int) -> subprocess.Popen:
    """Worker `number`'s process (0, 1, ...), at its own port: started again, it comes back at the same address."""
    return _start(logs, "worker", str(DISPATCHER_PORT), str(DISPATCHER_PORT + 1 + number))


def _start(logs: Path, *arguments: str) -> subprocess.Popen:
    log = open(logs / f"{arguments[0]}-{arguments[-1]}.log", "ab")
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
    worker = roles.add_parser("worker")
    worker.add_argument("dispatcher_port", type=int)
    worker.add_argument("port", type=int)
    options = parser.parse_args(argv)

    from tensorflow.data.experimental import service

    if options.role == "dispatcher":
        fixed = [local_address(options.port + 1 + i) for i in range(options.static_workers)] or None
        server = service.DispatchServer(service.DispatcherConfig(
            port=options.port, worker_addresses=fixed, worker_timeout_ms=WORKER_TIMEOUT_MS))
    else:
        server = service.WorkerServer(service.WorkerConfig(
            dispatcher_address=local_address(options.dispatcher_port), port=options.port,
            worker_address=local_address(options.port), heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS))
    print(f"{options.role} serving on port {options.port}", flush=True)
    server.join()


if __name__ == "__main__":
    serve(sys.argv[1:])
