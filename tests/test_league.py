"""The league table (`league.table`): its correctness gate rejects a peer that does other work, and
`python -m league` ranks what passes, says what is not started or not installed, and saves its figures."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from league import entries
from league import table as league
from data_gen.encodings import ENCODINGS
from loaderlab.images import file_kind, linked_split, reference_crop
from loaderlab.machine import usable_cores
from loaderlab.tar_shards import sample_key
from loaderlab.paths import REPO_ROOT
from loaderlab.processes import python_environment
from loaderlab.sandbox import unavailable as sandbox_unavailable
from loaderlab.storage.bucket import RemoteSplit, StoredSample
from loaderlab.storage.server import Endpoint

IMAGES = 12


@pytest.fixture(scope="module")
def setup() -> Iterator[league.Setup]:
    with linked_split(league.league_samples("ci", IMAGES)) as (root, _):
        yield league.Setup(root, root / "no-shards", batch_size=5)


def _reference_batches(setup: league.Setup) -> list[tuple[np.ndarray, np.ndarray]]:
    samples = league.list_samples(setup.root)
    return [(np.stack([reference_crop(s.path).transpose(2, 0, 1) for s in samples[i : i + 5]]),
             np.array([s.label for s in samples[i : i + 5]])) for i in range(0, len(samples), 5)]


def test_gate_passes_the_reference_decode(setup: league.Setup) -> None:
    note = league.gate(_reference_batches(setup), league.list_samples(setup.root), setup.batch_size)
    assert "uint8 NCHW" in note and "0.00 off" in note


def test_gate_rejects_a_peer_that_skips_the_crop(setup: league.Setup) -> None:
    with pytest.raises(league.GateFailure, match="not the 256 resize \\+ 224 centre crop") as caught:
        league.gate(entries.skips_the_crop(setup), league.list_samples(setup.root), setup.batch_size)
    assert re.fullmatch(r"pixels [\d.]+ levels off \(allowed 2.0\)", caught.value.brief)  # the chart's label


def test_the_league_and_its_gate_meet_every_kind_of_file(setup: league.Setup) -> None:
    """The league's images (and so the gate's pixel checks, which take a file of every kind in the pass) hold a file
    of every kind data_gen writes, however few images it takes."""
    kinds = {file_kind(s.path.read_bytes()).split(" ")[0] for s in league.list_samples(setup.root)}
    assert len(league.list_samples(setup.root)) == IMAGES and kinds == set(ENCODINGS)


def test_gate_rejects_a_peer_that_applies_exif_orientation(setup: league.Setup) -> None:
    with pytest.raises(league.GateFailure, match="Every one of them is of kind exif-orientation") as caught:
        league.gate(entries.applies_exif_orientation(setup), league.list_samples(setup.root), setup.batch_size)
    assert "(exif-orientation " in str(caught.value)


def test_gate_rejects_wrong_labels_and_lost_samples(setup: league.Setup) -> None:
    samples = league.list_samples(setup.root)
    batches = _reference_batches(setup)
    with pytest.raises(league.GateFailure, match="wrong labels") as caught:
        league.gate([(images, labels + 1) for images, labels in batches], samples, setup.batch_size)
    assert caught.value.brief == f"{len(samples)} wrong labels"
    with pytest.raises(league.GateFailure, match="expected each of"):
        league.gate(batches[:-1], samples, setup.batch_size)
    with pytest.raises(league.GateFailure, match="dtype"):
        league.gate([(images.astype(np.int16), labels) for images, labels in batches], samples, setup.batch_size)


def test_gate_matches_keyed_batches_in_any_order(setup: league.Setup) -> None:
    samples = league.list_samples(setup.root)
    batches = _reference_batches(setup)[::-1]
    keyed = []
    for images, labels in batches:
        keys = [sample_key(s) for s in samples if any(np.array_equal(reference_crop(s.path).transpose(2, 0, 1), im)
                                                        for im in images)]
        keyed.append((images, labels, keys))
    league.gate(keyed, samples, setup.batch_size)
    with pytest.raises(league.GateFailure):  # the same batches without keys are out of order
        league.gate(batches, samples, setup.batch_size)


def test_the_league_from_the_command_line(tmp_path: Path) -> None:
    """One round on 16 ci images: the planted peer is rejected, the candidate and the ceiling are ranked, each with
    the host's CPU per image, the learner's stub reads "not started", an absent peer names the command that adds it."""
    out = tmp_path / "league.json"
    entries = "decode-only,thread-batch,planted-skips-crop,yours-ex04,dali"
    done = subprocess.run([sys.executable, "-m", "league", "--profile", "ci", "--rounds", "1",
                           "--images", "16", "--entries", entries, "--out", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(out.read_text())["rows"]}
    assert rows["planted-skips-crop"]["status"] == "rejected"
    assert rows["planted-skips-crop"]["brief"].startswith("pixels ")  # what the chart writes beside its grey bar
    assert league._short_reason(rows["planted-skips-crop"]) == rows["planted-skips-crop"]["brief"]
    assert rows["thread-batch"]["status"] == "ranked" and rows["thread-batch"]["median"] > 0
    assert rows["thread-batch"]["cpu_ms_per_image"][0] > 0
    assert rows["decode-only"]["status"] == "ceiling"
    assert rows["yours-ex04"]["status"] in ("not started", "ranked")
    assert [name for name, row in rows.items() if row["yours"]] == ["yours-ex04"]  # what the playbook highlights
    assert rows["dali"]["status"] in ("not installed", "rejected", "ranked")
    if rows["dali"]["status"] == "not installed":
        assert "make league-peers" in rows["dali"]["note"] and "make league-peers" in done.stdout
    assert out.with_suffix(".png").stat().st_size > 0


def test_the_disaggregated_entries_pass_the_gate_in_their_sandboxes() -> None:
    """The tf.data service and Ray Data entries, each in its sandbox, pass the gate on 16 ci images (or say why no
    sandbox can be made) and leave no folder of theirs behind (Ray's session files among them). Gated, not timed: a
    timed pass runs the same code for every entry (the command-line test times two), and each sandboxed pass starts
    a cluster of its own (the command line with both entries timed took 66 s alone, against 31 s without them)."""
    child_folders = set(Path(tempfile.gettempdir()).glob("loaderlab-league-child-*"))
    gated = league.run_league("ci", rounds=0, images=16, names=["tfdata-service", "ray-data"], log=lambda _: None)
    for row in gated["rows"]:
        if sandbox_unavailable():
            assert row["status"] == "not installed" and "no sandbox" in row["note"], row
        else:
            assert row["status"] == "ranked" and "uint8" in row["note"], row
    assert set(Path(tempfile.gettempdir()).glob("loaderlab-league-child-*")) <= child_folders


@pytest.mark.parametrize("name, module", [("opencv", "cv2"), ("opencv-reduced", "cv2"), ("torchcodec", "torchcodec")])
def test_a_peer_that_does_the_leagues_work_passes_the_gate(setup: league.Setup, name: str, module: str) -> None:
    """OpenCV (in the lock) and, where installed, torchcodec pass the gate on ci images (INTER_AREA, and OpenCV's
    DCT-reduced decode, stay within the tolerance of the reference's antialiased bilinear)."""
    if not league._has_module(module):
        pytest.skip(f"{module} is not installed ({entries.BY_NAME[name].install})")
    entry = entries.BY_NAME[name]
    note = league.gate(league.entry_builder(entry)(setup), league.list_samples(setup.root), setup.batch_size)
    assert "uint8" in note


def test_every_optional_peer_names_the_pins_that_make_league_peers_installs() -> None:
    """An entry outside the lock says "not installed" with `make league-peers` and its pins, as requirements-peers.txt
    writes them."""
    pinned = {line.split("==")[0] for line in entries.PEERS_FILE.read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    for name, projects in [("dali", ["nvidia-dali-cuda120"]), ("dali-roi", ["nvidia-dali-cuda120"]),
                           ("torchcodec", ["torchcodec"]), ("spdl", ["spdl-io", "spdl-core"])]:
        install = entries.BY_NAME[name].install
        assert install.startswith(entries.PEERS_COMMAND), name
        for project in projects:
            assert project in pinned and entries.peer_pin(project) in install, (name, project)


def test_make_league_peers_installs_the_pin_the_league_names() -> None:
    """`make league-peers` installs the file the league reads its DALI pin from (the pin is written once)."""
    recipe = (REPO_ROOT / "Makefile").read_text().split("\nleague-peers:")[1].split("\n\n")[0]
    assert f"install -r {entries.PEERS_FILE.name}" in recipe
    assert entries.DALI_PIN.startswith("nvidia-dali-cuda120==")


def test_a_learners_copy_without_solutions_lists_the_solutions_as_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make learner-copy` leaves solutions/ out: their entries read "not installed" and say why, and the learner's
    own entries and the course's candidates still run."""
    from league import notebook as league_notebook

    monkeypatch.setitem(sys.modules, "solutions", None)  # what an import finds in a copy without the folder
    monkeypatch.setitem(sys.modules, "solutions.ex01_profile_and_fix", None)
    monkeypatch.setattr(league, "_has_module", lambda name: name.split(".")[0] != "solutions")
    result = league.run_league("ci", 1, 12, ["ex04", "yours-ex04", "thread-batch"], log=lambda line: None,
                               run_entry=league_notebook.in_this_process)
    rows = {row["name"]: row for row in result["rows"]}
    assert rows["ex04"]["status"] == "not installed" and rows["ex04"]["note"] == entries.SOLUTIONS_NOTE
    assert rows["thread-batch"]["status"] == "ranked", "the candidates are the course's, not the solutions'"
    assert rows["yours-ex04"]["status"] == "not started"


def test_the_league_writes_module_06s_shards_that_the_solution_reads(tmp_path: Path) -> None:
    """Shards written for the league (webdataset's TarWriter) hold every sample, in order, as exercise 08 reads them."""
    from solutions.ex08_shards import ShardDataset

    with linked_split(league.league_samples("ci", IMAGES)) as (root, samples):
        league._write_shards(root, tmp_path)
        keys = [item.key for item in ShardDataset(tmp_path, shuffle=False)]
        expected = [s.path.relative_to(root).with_suffix("").as_posix() for s in league.list_samples(root)]
        assert keys == expected and len(list(tmp_path.glob("shard-*.tar"))) > 1


# ---- the league from object storage (league.remote) ----------------------------------------------------------------

def _in_this_process(entry: entries.Entry, setup_file: Path, mode: str) -> dict:
    from league import remote

    return remote.run_remote_child(entry, remote.RemoteSetup.load(setup_file), mode)


@pytest.mark.usefixtures("s3_server")
def test_the_remote_league_gates_and_times_through_the_proxy_and_says_what_is_absent() -> None:
    """One round on ci's first 16 training images from the session's S3 server through the region proxy (in this
    process: the fresh processes cost more than the league): exercise 14's shard reader passes the gate and is
    timed with the proxy's counts (one GET per 16-sample shard), exercise 15's unstarted answer and the
    uninstallable peers say so, and the ceilings are the network model and the local decode."""
    from league import remote

    result = remote.run_remote_league("ci", 1, 16, ["decode-only", "ex14-shards", "ex15", "yours-ex15", "s3fs",
                                                    "mosaic-streaming"], log=lambda line: None,
                                      run_entry=_in_this_process)
    rows = {row["name"]: row for row in result["rows"]}
    shards = rows["ex14-shards"]
    assert shards["status"] == "ranked" and "uint8 NCHW" in shards["note"], shards
    assert shards["requests_per_image"] == [1 / 16] and shards["bytes_per_image"][0] > result["mean_bytes_per_image"]
    assert rows["ex15"]["status"] == "ranked", rows["ex15"]
    assert rows["yours-ex15"]["status"] == "not started" and rows["yours-ex15"]["yours"]
    for name in ("s3fs", "mosaic-streaming"):
        assert rows[name]["status"] == "not installed" and "lock pins" in rows[name]["note"]
    assert result["images"] == 16 and result["network_profile"]["name"] == "region"
    assert result["network_ceiling"] == pytest.approx(200e6 / result["mean_bytes_per_image"])
    assert result["ceiling"] == min(result["network_ceiling"], rows["decode-only"]["median"])
    assert "network ceiling" in remote.table(result)


def test_the_leagues_index_is_the_splits_cut_to_its_first_images() -> None:
    from league import remote

    index = {"split": "train", "samples": [{"key": f"k{i}", "shard": f"s{i // 2}"} for i in range(6)],
             "shards": [{"key": f"s{i}"} for i in range(3)]}
    cut = remote.league_index(index, 3)
    assert [s["key"] for s in cut["samples"]] == ["k0", "k1", "k2"] and [s["key"] for s in cut["shards"]] == ["s0", "s1"]
    assert remote.league_index(index, None) == index


def test_a_child_reads_the_setup_the_league_wrote_with_the_endpoint_and_index_typed(tmp_path: Path) -> None:
    """The setup file holds the endpoint as its one serialisation and the league's index document; a child reads back
    the endpoint and the typed index (at the league's key), and no other user may read the file (it holds keys)."""
    from league import remote

    endpoint = Endpoint("http://127.0.0.1:9", "AK", "SK", "eu-west-1")
    index = {"split": "train", "shards": [{"key": "shards/train/shard-00000.tar"}],
             "samples": [{"key": "circles/x", "label": 3, "object": "images-0/train/circles/x.jpg",
                          "shard": "shards/train/shard-00000.tar", "offset": 512, "size": 9}]}
    path = tmp_path / "setup.json"
    remote.write_setup(path, endpoint, "bucket", "league/train-1.json", index, tmp_path / "links")
    setup = remote.RemoteSetup.load(path)
    assert setup.endpoint == endpoint and setup.bucket == "bucket" and setup.root == str(tmp_path / "links")
    assert setup.selection == RemoteSplit((StoredSample("circles/x", 3, "images-0/train/circles/x.jpg",
                                                        "shards/train/shard-00000.tar", 512, 9),),
                                          ("shards/train/shard-00000.tar",), "league/train-1.json")
    assert setup.keys() == {"circles/x"} and path.stat().st_mode & 0o077 == 0


def test_the_command_line_refuses_an_entry_of_the_other_source(capsys: pytest.CaptureFixture[str]) -> None:
    from league.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--source", "s3", "--entries", "dali"])
    assert exited.value.code == 2 and "unknown entries ['dali'] for --source s3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--source", "ftp"])
    with pytest.raises(SystemExit):
        main(["--source", "s3", "--images", "0"])


def test_the_peers_that_read_shards_keep_as_many_in_flight_as_the_courses_shard_readers(tmp_path: Path) -> None:
    """webdataset and s3torchconnector read a shard at a time per DataLoader worker: they get SHARDS_IN_FLIGHT
    workers (not a worker per core), so every shard reader keeps the same GETs in flight, as the table's column
    says; the naive DataLoader alone keeps a worker per core."""
    from league import remote

    shards = tuple(f"shards/train/shard-{i:05d}.tar" for i in range(20))
    setup = remote.RemoteSetup(Endpoint("http://127.0.0.1:9", "AK", "SK"), "bucket",
                               RemoteSplit((), shards, "league/train-320.json"), str(tmp_path))
    (loader,) = remote.webdataset_http(setup).pipeline
    assert loader.num_workers == remote.SHARDS_IN_FLIGHT
    if importlib.util.find_spec("s3torchconnector") is not None:
        assert remote.s3torchconnector_shards(setup).num_workers == remote.SHARDS_IN_FLIGHT
    assert remote.naive_objects(setup).num_workers == usable_cores()
    for name in ("ex14-shards", "ex14-shards-ex01", "webdataset-http", "s3torchconnector"):
        assert remote.IN_FLIGHT[name] == f"{remote.SHARDS_IN_FLIGHT} shards"
    assert remote.IN_FLIGHT["naive-objects"] == f"{usable_cores()} objects"
    assert set(remote.IN_FLIGHT) == {e.name for e in remote.REMOTE_ENTRIES if e.build}
    league = {"network_ceiling": 1000.0, "decode_ceiling": 500.0, "profile": "ci", "split": "train", "images": 16,
              "rounds": 1, "cores": 2, "date": "2026-12-07", "mean_bytes_per_image": 150e3,
              "network_profile": {"name": "region", "latency_s": 0.05, "connection_bytes_per_s": 50e6,
                                  "total_bytes_per_s": 200e6, "prefix_gets_per_s": 150},
              "rows": [{"name": "webdataset-http", "title": "t", "status": "ranked", "note": "", "median": 300.0,
                        "images_per_s": [300.0], "requests_per_image": [0.0625], "bytes_per_image": [160e3],
                        "in_flight": "8 shards"}]}
    header, row = remote.table(league).splitlines()[1:3]
    assert "in flight" in header and "8 shards" in row


def test_every_remote_peer_says_how_to_add_it_or_why_it_cannot_be() -> None:
    """s3torchconnector's row names `make league-peers` and its pin in requirements-peers.txt; s3fs and Mosaic
    Streaming, which cannot install beside the lock, say why (requirements-peers.txt's comment says the same)."""
    from league import remote

    install = remote.REMOTE_BY_NAME["s3torchconnector"].install
    assert install.startswith(entries.PEERS_COMMAND) and entries.peer_pin("s3torchconnector") in install
    peers = entries.PEERS_FILE.read_text()
    for name in ("s3fs", "mosaic-streaming"):
        entry = remote.REMOTE_BY_NAME[name]
        assert not entry.build and "lock pins" in entry.install
    assert "aiobotocore" in peers and "numpy<2.2.0" in peers


BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end:\n    pass\n"


def test_the_hosts_cpu_counts_worker_processes_and_leaves_out_the_servers_that_stand_for_other_machines() -> None:
    """A child that burns 0.5 s of CPU counts once it has been waited for; a child whose command line holds any of the
    markers of processes that stand for other machines (league.table.ELSEWHERE: the tf.data service's servers, Ray's
    task workers and Ray's own processes) does not."""
    before = league.host_cpu_seconds()
    subprocess.run([sys.executable, "-c", BUSY.format(seconds=0.5)], check=True)
    counted = league.host_cpu_seconds() - before
    elsewhere = [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=0.5) + "import time; time.sleep(30)",
                                   marker], env=python_environment()) for marker in league.ELSEWHERE]
    try:
        time.sleep(1.0 + 0.5 * len(elsewhere))   # each burns its 0.5 s, then sleeps, still living
        assert all(process.poll() is None for process in elsewhere)
        left_out = league.host_cpu_seconds() - before - counted
    finally:
        for process in elsewhere:
            process.kill()
            process.wait()
    assert counted >= 0.45, f"a child's 0.5 s of CPU counted {counted:.2f} s"
    assert left_out < 0.2, f"the processes that stand for other machines counted {left_out:.2f} s"
