"""Run a function on N ranks of a `torch.distributed` job on this machine: gloo, on the loopback address only.

`run_ranks(function, world_size)` starts one process per rank, joins them into a gloo process group
through a TCP store that this process hosts on 127.0.0.1 (the port is chosen free by the system for
every run), calls `function(rank, world_size, *args)` in each, and gathers what each rank returned or
raised. A rank still running at the time limit (typically blocked in a collective that another rank
never joins) is reported as hung, with the Python stack it was blocked in where the platform can dump
it; every rank and every process a rank started is stopped before `run_ranks` returns.

Under `torchrun` on a cluster the same function runs with another launcher, provided its collectives put their
tensors where the group's backend can reduce them: NCCL has no CPU collectives, so under `init_process_group("nccl")`,
and under `init_process_group()` without a backend on a CUDA host (torch then configures NCCL alone), a tensor must be on
the rank's GPU (`collective_device()` says where; a group made with `backend="cpu:gloo,cuda:nccl"` takes CPU tensors
too). Nothing in this course runs NCCL: that is not measured here.
`function` must be importable by name (a top-level function of a `.py` module) wherever the start
method is spawn or forkserver.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import pickle
import signal
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import psutil

from loaderlab.processes import stop_tree

LOOPBACK = "127.0.0.1"
RETURNED, RAISED, HUNG, DIED, STOPPED = "returned", "raised", "hung", "died", "stopped"
JOINED = "joined"         # a rank's first message: it is in the group, the run's time limit may start
# Once one rank has failed, the others usually wait for it in their next collective: they get this
# long to finish on their own before they are stopped (and reported as stopped, not as hung).
AFTER_FAILURE_GRACE_S = 3.0
STACK_DUMP_WAIT_S = 1.0   # for a hung rank to write its stack after it is asked to
EXIT_WAIT_S = 5.0         # for a rank that has replied to exit by itself
RANK_BACKSTOP_EXTRA_S = 30.0  # gloo's own timeout in a rank: the run's limit plus this, so the parent acts first


@dataclass(frozen=True)
class RankResult:
    """What one rank did: returned `value`, raised (`detail` is the traceback), hung, died or was stopped."""

    rank: int
    status: str
    value: Any = None
    detail: str = ""
    seconds: float = 0.0   # from the start of the run until this outcome was known

    @property
    def ok(self) -> bool:
        return self.status == RETURNED

    def describe(self) -> str:
        """One paragraph for a failure message."""
        return {
            RETURNED: f"rank {self.rank} returned",
            RAISED: f"rank {self.rank} raised:\n{self.detail}",
            HUNG: f"rank {self.rank} hung: {self.detail}",
            DIED: f"rank {self.rank} died: {self.detail}",
            STOPPED: f"rank {self.rank} was stopped: {self.detail}",
        }[self.status]


class RanksFailed(RuntimeError):
    """Some rank did not return; `results` holds every rank's outcome, the message says what went wrong."""

    def __init__(self, results: Sequence[RankResult]) -> None:
        self.results = list(results)
        failed = [r for r in results if not r.ok]
        # Causes first: the first rank to raise, hang or die (the others often fail only because it left);
        # the ranks stopped while they waited for it last.
        failed.sort(key=lambda r: (r.status == STOPPED, r.seconds, r.rank))
        super().__init__("\n".join(r.describe() for r in failed))


def values(results: Sequence[RankResult]) -> list[Any]:
    """Every rank's return value in rank order, or RanksFailed naming each rank that did not return."""
    if not all(r.ok for r in results):
        raise RanksFailed(results)
    return [r.value for r in results]


def collective_device(group: Any = None) -> Any:
    """The device a tensor must be on for a collective of `group` (the default group when None).

    Decided by the group's backend configuration (`dist.get_backend_config`: one backend per device type), not by
    `dist.get_backend`, which reads "undefined" for a group made by `init_process_group()` without a backend: torch
    then configures the backend of the accelerator it finds alone ("cuda:nccl" on a CUDA host, "cpu:gloo" on a
    machine without one). See `collective_device_type` for the rule; a GPU is the rank's current one.
    """
    import torch
    import torch.distributed as dist

    device_type = collective_device_type(dist.get_backend_config(group))
    if device_type == "cpu":
        return torch.device("cpu")
    return torch.device(device_type, torch.accelerator.current_device_index())


def collective_device_type(backend_config: str) -> str:
    """The device type for a collective under `backend_config`, as `dist.get_backend_config` writes it
    ("cpu:gloo,cuda:nccl", "cuda:nccl", "cpu:gloo,cuda:gloo" for gloo): "cpu" when a backend takes CPU tensors
    (gloo, MPI, UCC, or a CPU backend paired with NCCL), else the first device type configured (NCCL has no CPU
    collectives: "cuda"). The same rule as torch's own choice for object collectives (`_get_object_coll_device`)."""
    pairs = [pair.strip() for pair in backend_config.lower().split(",") if pair.strip()]
    if any(pair.count(":") != 1 for pair in pairs):
        raise ValueError(f"collective_device_type: {backend_config!r} is not a backend configuration of device:backend "
                         "pairs such as 'cpu:gloo,cuda:nccl' (dist.get_backend_config(), not dist.get_backend()).")
    device_types = [pair.split(":")[0] for pair in pairs]
    return "cpu" if not device_types or "cpu" in device_types else device_types[0]


def loopback_interface() -> str | None:
    """The name of the network interface that holds 127.0.0.1 ('lo' on Linux, 'lo0' on macOS), if one does."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(address.family == socket.AF_INET and address.address == LOOPBACK for address in addresses):
            return name
    return None


def _rank_main(rank: int, world_size: int, port: int, interface: str | None, timeout_s: float, startup_timeout_s: float,
               function: Callable[..., Any], args: tuple[Any, ...], reply: Connection, stack_file: str) -> None:
    """One rank: join the gloo group through the parent's store, run `function`, send back what happened."""
    import torch.distributed as dist

    if interface:  # gloo's own connections between ranks: on the loopback interface only
        os.environ["GLOO_SOCKET_IFNAME"] = interface

    with open(stack_file, "w") as stack:
        dumps_stack = hasattr(signal, "SIGUSR1")  # the parent asks a hung rank for its stack with SIGUSR1 (POSIX)
        if dumps_stack:
            faulthandler.register(signal.SIGUSR1, file=stack, all_threads=True)
        outcome: tuple[str, Any] | None = None
        try:
            # A backstop only: the parent's deadline, which starts earlier, stops a hung rank first.
            backstop = timedelta(seconds=startup_timeout_s + timeout_s + RANK_BACKSTOP_EXTRA_S)
            store = dist.TCPStore(LOOPBACK, port, world_size, is_master=False, timeout=backstop)
            dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=backstop)
            reply.send((JOINED, None, time.monotonic()))
            try:
                outcome = (RETURNED, function(rank, world_size, *args))
            except BaseException:
                outcome = (RAISED, traceback.format_exc())
            # Reply before leaving the group: the others may fail as soon as this rank leaves, and the first
            # failure (by the time it happened, on the clock all processes share) is the cause.
            _reply(reply, outcome, time.monotonic())
            dist.destroy_process_group()
        except BaseException:  # joining the group failed (leaving it after the reply changes nothing)
            if outcome is None:
                _reply(reply, (RAISED, traceback.format_exc()), time.monotonic())
        finally:
            if dumps_stack:
                faulthandler.unregister(signal.SIGUSR1)
            reply.close()


def _reply(reply: Connection, outcome: tuple[str, Any], when: float) -> None:
    """Send (status, payload, when) to the parent; a value that cannot be pickled is reported instead."""
    try:
        reply.send((*outcome, when))
    except (pickle.PicklingError, TypeError, AttributeError):
        reply.send((RAISED, f"its return value could not be sent back:\n{traceback.format_exc()}", when))


def kill_tree(process: multiprocessing.process.BaseProcess, timeout_s: float = EXIT_WAIT_S) -> None:
    """SIGKILL a process and every process it started (DataLoader workers, say), as a machine that dies would, and
    reap it; up to `timeout_s` for them all to be gone (`loaderlab.processes.stop_tree` with no grace: the
    descendants first, since, forked, they hold the process's end of the pipe that join() waits on)."""
    stop_tree(process, grace_s=0, kill_wait_s=timeout_s)


def _stack_of(process: multiprocessing.process.BaseProcess, stack_file: Path) -> str:
    """The Python stack a running rank is blocked in, or '' where it cannot be had."""
    if not hasattr(signal, "SIGUSR1") or process.pid is None:
        return ""
    try:
        os.kill(process.pid, signal.SIGUSR1)
    except OSError:
        return ""
    deadline = time.monotonic() + STACK_DUMP_WAIT_S
    text = ""
    while time.monotonic() < deadline:
        time.sleep(0.1)
        text = stack_file.read_text(errors="replace") if stack_file.exists() else ""
        if text.strip():
            break
    return text.strip()


def _loopback_listener(world_size: int) -> socket.socket:
    """A socket listening on a free port of 127.0.0.1, for the store: port 0 lets the system choose one per run,
    so two runs never race for a port. Ranks that connect before the store serves it wait in its backlog."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((LOOPBACK, 0))
        listener.listen(max(128, world_size))
    except BaseException:
        listener.close()
        raise
    return listener


def _loopback_store(listener: socket.socket, world_size: int, timeout_s: float) -> Any:
    """A TCPStore served from this process on `listener`'s address (127.0.0.1), and on no other address.

    Given only a host and a port, TCPStore listens on every interface ('::'); handed a socket already
    bound to the loopback address (`master_listen_fd`), it serves there alone. The store closes the socket.
    It is made after the ranks have started: a process forked while the store's threads run can inherit one
    of their locks held (ranks forked from a Jupyter kernel hung in the store's client 1 run in 8 that way).
    """
    import torch.distributed as dist

    try:
        store = dist.TCPStore(LOOPBACK, listener.getsockname()[1], world_size, is_master=True,
                              timeout=timedelta(seconds=timeout_s), wait_for_workers=False,
                              master_listen_fd=listener.fileno())
    except BaseException:
        listener.close()
        raise
    listener.detach()  # the store owns the descriptor now
    return store


def _innermost_frames(stack: str) -> str:
    """A faulthandler dump cut after the rank's own entry point: the process start-up frames say nothing."""
    lines = stack.splitlines()
    entry = next((i for i, line in enumerate(lines) if f"in {_rank_main.__name__}" in line), None)
    return "\n".join(lines if entry is None else lines[:entry + 1])


def run_ranks(function: Callable[..., Any], world_size: int, args: tuple[Any, ...] = (), timeout_s: float = 60.0,
              startup_timeout_s: float = 120.0, start_method: str | None = None) -> list[RankResult]:
    """Run `function(rank, world_size, *args)` on `world_size` ranks joined in a gloo group on 127.0.0.1.

    Returns one RankResult per rank, in rank order. The ranks have `startup_timeout_s` to start and join
    the group (a spawn-started rank imports torch first: seconds on a busy machine), then `timeout_s` to
    return: a rank still running then is `hung` (its stack in `detail`), and once a rank has raised or
    died the others get AFTER_FAILURE_GRACE_S before they are `stopped`. Every rank process and its
    children are gone when this returns. `start_method` defaults to multiprocessing's.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    context = multiprocessing.get_context(start_method)
    interface = loopback_interface()
    listener = _loopback_listener(world_size)
    port = listener.getsockname()[1]
    store = None
    results: dict[int, RankResult] = {}
    with tempfile.TemporaryDirectory(prefix="loaderlab-ranks-") as tmp:
        stack_files = [Path(tmp) / f"rank{rank}.stack" for rank in range(world_size)]
        processes, replies = [], {}
        try:
            for rank in range(world_size):
                receive, send = context.Pipe(duplex=False)
                process = context.Process(
                    target=_rank_main, name=f"rank-{rank}",
                    args=(rank, world_size, port, interface, timeout_s, startup_timeout_s, function, args, send,
                          str(stack_files[rank])))
                process.start()
                send.close()
                processes.append(process)
                replies[receive] = rank
            store = _loopback_store(listener, world_size, startup_timeout_s)
            _gather(processes, replies, results, timeout_s, startup_timeout_s, stack_files)
        finally:
            for rank, process in enumerate(processes):
                outcome = results.get(rank)
                if outcome is not None and outcome.status in (RETURNED, RAISED):
                    process.join(EXIT_WAIT_S)  # it replied: let it leave by itself
                if process.is_alive():
                    kill_tree(process)
            for connection in replies:
                connection.close()
            if store is None:
                listener.close()
    del store
    return [results[rank] for rank in range(world_size)]


def _gather(processes: list[multiprocessing.process.BaseProcess], replies: dict[Connection, int],
            results: dict[int, RankResult], timeout_s: float, startup_timeout_s: float,
            stack_files: list[Path]) -> None:
    """Fill `results` as ranks reply or die; at the deadline, mark the rest hung (or stopped after a failure).

    The deadline is `startup_timeout_s` until every rank has joined the group, then `timeout_s` from then.
    """
    start = time.monotonic()
    deadline = start + startup_timeout_s
    joined: set[int] = set()
    first_failure: RankResult | None = None
    waiting = dict(replies)
    sentinels = {process.sentinel: rank for rank, process in enumerate(processes)}
    while len(results) < len(processes):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready = wait([*waiting, *(s for s, r in sentinels.items() if r not in results)], remaining)
        for item in ready:
            if item in waiting:
                rank = waiting[item]
                try:
                    status, payload, when = item.recv()
                except (EOFError, OSError):
                    del waiting[item]
                    continue  # the rank died before replying: its sentinel says so
                if status == JOINED:
                    joined.add(rank)
                    if len(joined) == len(processes):  # the run itself starts now
                        deadline = time.monotonic() + timeout_s
                    continue
                del waiting[item]
                results[rank] = RankResult(rank, status, payload if status == RETURNED else None,
                                           "" if status == RETURNED else payload, max(0.0, when - start))
            elif sentinels[item] not in results:
                rank = sentinels[item]
                connection = next((c for c, r in waiting.items() if r == rank), None)
                if connection is not None and connection.poll():
                    continue  # it replied, then exited: read the reply first
                processes[rank].join(EXIT_WAIT_S)  # its sentinel is ready: this reaps it, and reads its exit code
                exitcode = processes[rank].exitcode
                results[rank] = RankResult(rank, DIED, detail=f"its process exited with code {exitcode} without "
                                           "returning (killed, out of memory, or os._exit)",
                                           seconds=time.monotonic() - start)
        failures = [r for r in results.values() if not r.ok]
        if failures and first_failure is None:
            first_failure = min(failures, key=lambda r: r.seconds)
            deadline = min(deadline, time.monotonic() + AFTER_FAILURE_GRACE_S)
    all_joined = len(joined) == len(processes)
    for rank, process in enumerate(processes):
        if rank in results:
            continue
        if first_failure is not None:
            results[rank] = RankResult(rank, STOPPED, detail=(
                f"still running {AFTER_FAILURE_GRACE_S:g} s after rank {first_failure.rank} {first_failure.status} "
                "(waiting for it in a collective, most likely)"), seconds=time.monotonic() - start)
            continue
        stack = _innermost_frames(_stack_of(process, stack_files[rank]))
        if all_joined:
            detail = (f"still running {timeout_s:g} s after every rank had joined the group; a rank blocked in a "
                      "collective (all_reduce, barrier, ...) that another rank never joins waits forever")
        else:
            detail = (f"{'joined the group' if rank in joined else 'did not join the group'} within "
                      f"{startup_timeout_s:g} s, and ranks {sorted(set(range(len(processes))) - joined)} never did")
        results[rank] = RankResult(rank, HUNG, detail=detail + (f". Where it was blocked:\n{stack}" if stack else ""),
                                   seconds=time.monotonic() - start)
