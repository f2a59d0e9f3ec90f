"""A sandbox for a job whose servers listen on every interface: its processes in namespaces of their own (Linux).

torchrun's rendezvous stores and tf.data service's dispatcher and workers bind every interface, whatever address
they are given, and answer without authentication (docs/module11-plan.md says what was measured). The course runs
such a job only in a sandbox that makes "every interface" mean loopback: `sandboxed` starts a command in a new user,
network and PID namespace, made without root by util-linux's `unshare`:

    guardian (loaderlab.processes, stops with its owner)
      unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc
        python -m loaderlab.sandbox -- COMMAND    (the namespaces' first process: brings loopback up, runs COMMAND)

- **Loopback only.** The network namespace has one interface, `lo`: a server inside that binds `0.0.0.0` is
  reachable from inside alone. `Sandbox.interfaces()` and `Sandbox.listeners()` read what the namespace has, from
  this side, to test it.
- **Nothing left running.** When the first process of a PID namespace ends, the kernel kills every other process in
  it. It ends when COMMAND ends, when `unshare` ends (`--kill-child`), and `unshare` is stopped by the guardian when
  the owner ends, SIGKILL included.
- **Where it cannot be made.** macOS and Windows have no such namespaces, and some Linux distributions refuse
  unprivileged user namespaces; `unavailable()` says why, and the course then does not start the job.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from loaderlab.processes import python_environment, start_owned, stop_tree

UNSHARE = ("unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc")
PROBE_TIMEOUT_S = 10.0   # making the namespaces and running `true` in them took 3-5 ms on the development machine
FIND_TIMEOUT_S = 10.0    # for the namespaces' first process to appear under the guardian
STOP_GRACE_S = 5.0       # between SIGTERM and SIGKILL when the sandbox is stopped
LOOPBACK = "lo"
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1   # linux/sockios.h, linux/if.h
TCP_LISTEN = "0A"        # the state column of /proc/net/tcp
WATCH_POLL_S = 0.2       # how often `Sandbox.watch` reads the listeners while the command runs


@functools.cache
def unavailable() -> str | None:
    """Why a sandbox cannot be made on this machine, or None where it can (found once, by making one)."""
    if not sys.platform.startswith("linux"):
        return (f"the sandbox needs Linux namespaces, and this is {sys.platform}: the course does not start servers "
                "that listen on every interface here (run this module on Linux, or in a Linux container or WSL 2)")
    if shutil.which("unshare") is None:
        return "util-linux's `unshare` is not installed (it makes the sandbox's namespaces); install util-linux"
    try:
        probe = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"`unshare` did not make the sandbox's namespaces within {PROBE_TIMEOUT_S:g} s"
    if probe.returncode:
        return (f"this Linux refuses unprivileged user namespaces ({probe.stderr.strip() or probe.returncode}): "
                "some distributions restrict them (Ubuntu 24.04's AppArmor setting "
                "kernel.apparmor_restrict_unprivileged_userns, Debian's kernel.unprivileged_userns_clone)")
    return None


@dataclass(frozen=True)
class Watched:
    """What `Sandbox.watch` saw: the command's exit status (None if it ran past the limit), every TCP listener and
    network interface seen inside while it ran."""

    returncode: int | None
    listeners: list[tuple[str, int]]
    interfaces: list[str]
    timed_out: bool


@dataclass
class Sandbox:
    """A command running in its own namespaces: `process` is its guardian (the command's output is its output)."""

    process: subprocess.Popen
    first: psutil.Process     # the namespaces' first process, as this side sees it

    def interfaces(self) -> list[str]:
        """The network interfaces inside the sandbox."""
        lines = self._read_net("dev").splitlines()[2:]   # two header lines, then "  lo: <counters>"
        return sorted(line.split(":", 1)[0].strip() for line in lines)

    def listeners(self) -> list[tuple[str, int]]:
        """(address, port) of every TCP socket listening inside the sandbox, IPv4 and IPv6."""
        found = []
        for table in ("tcp", "tcp6"):
            for line in self._read_net(table).splitlines()[1:]:
                fields = line.split()
                if fields[3] == TCP_LISTEN:
                    address, port = fields[1].split(":")
                    found.append((proc_address(address), int(port, 16)))
        return found

    def watch(self, limit_s: float) -> Watched:
        """Wait for the command to end, at most `limit_s` seconds, reading its listeners and interfaces meanwhile
        (every WATCH_POLL_S): what the sandbox held while it ran. Past the limit it is left running (the caller's
        block then stops it) and `timed_out` says so."""
        listeners: set[tuple[str, int]] = set()
        interfaces: set[str] = set()
        deadline = time.monotonic() + limit_s
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                return Watched(None, sorted(listeners), sorted(interfaces), timed_out=True)
            try:
                listeners.update(self.listeners())
                interfaces.update(self.interfaces())
            except OSError:    # the namespace ended between the poll and the read
                pass
            time.sleep(WATCH_POLL_S)
        return Watched(self.process.returncode, sorted(listeners), sorted(interfaces), timed_out=False)

    def _read_net(self, table: str) -> str:
        return Path(f"/proc/{self.first.pid}/net/{table}").read_text()


def proc_address(hex_address: str) -> str:
    """An address of /proc/net/tcp (IPv4: one little-endian word; IPv6: four) as text."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words)


@contextmanager
def sandboxed(command: Sequence[str], env: Mapping[str, str] | None = None, **popen: Any) -> Iterator[Sandbox]:
    """Run `command` in a sandbox for the duration of the block (module docstring); stopped on exit, and when this
    process ends however it ends. RuntimeError, saying why, where no sandbox can be made here. `popen` goes to
    subprocess.Popen (stdout=, stderr=, cwd=)."""
    reason = unavailable()
    if reason:
        raise RuntimeError(f"no sandbox: {reason}")
    guardian = start_owned([sys.executable, "-m", "loaderlab.processes", "--grace", str(STOP_GRACE_S), "--",
                            *UNSHARE, sys.executable, "-m", "loaderlab.sandbox", "--", *command],
                           env=python_environment(env), **popen)
    try:
        yield Sandbox(guardian, _first_process(guardian))
    finally:
        stop_tree(guardian, STOP_GRACE_S)


def _first_process(guardian: subprocess.Popen) -> psutil.Process:
    """The process that runs this module inside the namespaces, found among the guardian's descendants."""
    deadline = time.monotonic() + FIND_TIMEOUT_S
    while time.monotonic() < deadline:
        for child in psutil.Process(guardian.pid).children(recursive=True):
            try:
                if child.cmdline()[1:3] == ["-m", "loaderlab.sandbox"]:
                    return child
            except psutil.Error:
                continue
        if guardian.poll() is not None:
            raise RuntimeError(f"the sandbox ended (status {guardian.returncode}) before its first process started")
        time.sleep(0.01)
    raise TimeoutError(f"the sandbox's first process did not appear within {FIND_TIMEOUT_S:g} s")


# ---- inside: the namespaces' first process ----------------------------------------------------------------------

def bring_loopback_up() -> None:
    """Set `lo` up: a new network namespace has it down (the namespace's root may, in its own user namespace)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", LOOPBACK.encode(), 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", LOOPBACK.encode(), flags | IFF_UP))


def run_first(command: Sequence[str]) -> int:
    """As the namespaces' first process: loopback up, then `command` until it ends (SIGTERM passed on to it); its
    exit status. Returning ends the PID namespace: the kernel kills whatever `command` left."""
    bring_loopback_up()
    child = subprocess.Popen(list(command))
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    return child.wait()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m loaderlab.sandbox", usage="%(prog)s -- COMMAND ...",
                                     description="Inside the sandbox's namespaces (see `sandboxed`): loopback up, "
                                                 "then COMMAND.")
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no COMMAND after --")
    parser.parse_args(argv[:argv.index("--")])
    return run_first(argv[argv.index("--") + 1:])


if __name__ == "__main__":
    sys.exit(main())
