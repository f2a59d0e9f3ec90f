"""The sandbox for jobs whose servers listen on every interface (loaderlab.sandbox): loopback is the only way in, and
nothing of the job outlives its owner."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from loaderlab import sandbox
from loaderlab.processes import python_environment, read_announcement
from loaderlab.sandbox import sandboxed, unavailable

needs_sandbox = pytest.mark.skipif(unavailable() is not None, reason=f"no sandbox here: {unavailable()}")
ANNOUNCE_TIMEOUT_S = 20.0
GONE_WITHIN_S = 15.0   # the guardian's grace (5 s) and SIGKILL's wait, with room for a busy machine

# A server that binds every interface, as torchrun's stores and tf.data service's servers do, and says its port.
EVERY_INTERFACE_SERVER = (
    "import json, socket, time\n"
    "server = socket.socket()\n"
    "server.bind(('0.0.0.0', 0))\n"
    "server.listen()\n"
    "print(json.dumps({'port': server.getsockname()[1]}), flush=True)\n"
    "time.sleep(120)\n")


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def still_running(processes: list[psutil.Process]) -> list[str]:
    alive = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    return [f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in alive]


@needs_sandbox
def test_a_server_on_every_interface_is_reachable_from_inside_the_sandbox_alone() -> None:
    with sandboxed([sys.executable, "-c", EVERY_INTERFACE_SERVER], stdout=subprocess.PIPE) as box:
        port = read_announcement(box.process, ANNOUNCE_TIMEOUT_S)["port"]
        assert box.interfaces() == ["lo"]
        assert ("0.0.0.0", port) in box.listeners()
        taken_here = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        if port not in taken_here:   # another process of this machine may hold the same number in its namespace
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
        job = [box.process, *descendants(box.process.pid)]
        job = [psutil.Process(p.pid) for p in job]
    assert not still_running(job)


@needs_sandbox
def test_the_commands_exit_status_comes_back() -> None:
    with sandboxed([sys.executable, "-c", "raise SystemExit(3)"]) as box:
        assert box.process.wait(ANNOUNCE_TIMEOUT_S) == 3


@needs_sandbox
def test_a_killed_owner_leaves_nothing_of_its_sandbox_running() -> None:
    owner_code = (
        "import json, subprocess, sys\n"
        "from loaderlab.processes import read_announcement\n"
        "from loaderlab.sandbox import sandboxed\n"
        f"server = {EVERY_INTERFACE_SERVER!r}\n"
        "with sandboxed([sys.executable, '-c', server], stdout=subprocess.PIPE) as box:\n"
        "    print(json.dumps(read_announcement(box.process, 20)), flush=True)\n"
        "    box.process.wait()\n")
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, env=python_environment())
    try:
        read_announcement(owner, ANNOUNCE_TIMEOUT_S)
        job = descendants(owner.pid)
        assert any("loaderlab.sandbox" in " ".join(p.cmdline()) for p in job), [p.cmdline() for p in job]
        owner.send_signal(signal.SIGKILL)
        owner.wait(ANNOUNCE_TIMEOUT_S)
        deadline = time.monotonic() + GONE_WITHIN_S
        while still_running(job) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not still_running(job), f"left running after its owner was killed: {still_running(job)}"
    finally:
        owner.kill()
        owner.wait()


def test_where_no_sandbox_can_be_made_it_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox.unavailable.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert "Linux namespaces" in sandbox.unavailable()
        with pytest.raises(RuntimeError, match="no sandbox: .*darwin"):
            with sandboxed([sys.executable, "-c", "pass"]):
                pass
    finally:
        sandbox.unavailable.cache_clear()


def test_the_listener_table_reads_both_address_families() -> None:
    assert sandbox.proc_address("0100007F") == "127.0.0.1"
    assert sandbox.proc_address("00000000000000000000000001000000") == "::1"
