"""Tests for data_gen: the generated ImageFolder tree, manifest, determinism and CLI behaviour.

One small ``ci`` dataset is generated per module and shared; the whole file
takes a few seconds on 2 cores.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from data_gen import CLASSES, PROFILES, REPO_ROOT, default_out_dir
from data_gen import build, cli
from data_gen.build import DataGenError, MANIFEST_COLUMNS, build_dataset, read_manifest
from data_gen.corrupt import KINDS
from data_gen.encodings import BASELINE, ENCODINGS, ORIENTATIONS, assign_kinds, kind_counts
from data_gen.render import BOUNDARY_SHORT_SIDES, planned_sizes
from loaderlab.images import file_kind

CI = PROFILES["ci"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "data_gen", *args], capture_output=True, text=True, env=env, cwd="/", timeout=120
    )


@pytest.fixture(scope="module")
def ci_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ci") / "data"
    result = build_dataset("ci", out, workers=2, log=lambda msg: None)
    assert result.built
    return out


@pytest.fixture(scope="module")
def ci_rows(ci_data: Path) -> list[dict]:
    return read_manifest(ci_data)


def sha_list(rows: list[dict]) -> list[tuple[str, str]]:
    return [(r["path"], r["sha256"]) for r in rows]


def test_classes_profiles_and_default_out_dir() -> None:
    assert list(CLASSES) == sorted(CLASSES) and len(CLASSES) == 10
    assert set(PROFILES) == {"ci", "workshop", "full"}
    assert default_out_dir("ci") == REPO_ROOT / "data" / "ci"
    assert default_out_dir("workshop", 4.0) == REPO_ROOT / "data" / "workshop-imbalance-4"
    assert default_out_dir("full", 2.5) == REPO_ROOT / "data" / "full-imbalance-2.5"


def test_tree_and_manifest_agree(ci_data: Path, ci_rows: list[dict]) -> None:
    header = (ci_data / "manifest.csv").read_text().splitlines()[0]
    assert header == ",".join(MANIFEST_COLUMNS)
    on_disk = sorted(p.relative_to(ci_data).as_posix() for p in ci_data.rglob("*") if p.is_file())
    listed = sorted(r["path"] for r in ci_rows)
    assert on_disk == sorted(listed + ["dataset.json", "manifest.csv"])
    for r in ci_rows:
        data = (ci_data / r["path"]).read_bytes()
        assert len(data) == r["bytes"]
        assert hashlib.sha256(data).hexdigest() == r["sha256"]
    meta = json.loads((ci_data / "dataset.json").read_text())
    counts = Counter(r["split"] for r in ci_rows)
    assert counts == {"train": 10 * CI.train_per_class, "val": 10 * CI.val_per_class, "dirty": 4 * CI.corrupt}
    assert meta["parameters"]["counts"] == dict(counts)
    assert meta["totals"]["files"] == len(ci_rows)


def test_labels_are_sorted_class_indices(ci_rows: list[dict]) -> None:
    for r in ci_rows:
        split, class_dir, name = r["path"].split("/")
        assert split == r["split"] and class_dir == r["class_name"] == CLASSES[r["label"]]
        assert name.startswith(f"{class_dir}_") and name.endswith(".jpg")
    assert Counter(r["label"] for r in ci_rows if r["split"] == "train") == {i: CI.train_per_class for i in range(10)}


def _planned(row: dict) -> tuple[int, int] | None:
    """The size data_gen planned for this manifest row's image (ci's counts), or None for a drawn one."""
    index = int(row["path"].rsplit("_", 1)[1].removesuffix(".jpg"))
    return planned_sizes(row["label"], CI.train_per_class).get(index) if row["split"] == "train" else None


def test_size_resolution_and_aspect(ci_data: Path, ci_rows: list[dict]) -> None:
    drawn = [r for r in ci_rows if r["status"] == "ok" and _planned(r) is None]
    mean_kb = sum(r["bytes"] for r in drawn) / len(drawn) / 1000
    assert 100 <= mean_kb <= 135, mean_kb
    mean_short = sum(min(r["width"], r["height"]) for r in drawn) / len(drawn)
    assert 400 <= mean_short <= 500, mean_short
    for r in drawn:
        long, short = max(r["width"], r["height"]), min(r["width"], r["height"])
        assert 1.33 <= long / short <= 1.78 and 300 <= short <= 600, r
    modes = {"grayscale": "L", "adobe-cmyk": "CMYK", "adobe-ycck": "CMYK"}
    for r in (r for r in ci_rows if r["status"] == "ok"):
        with Image.open(ci_data / r["path"]) as im:
            assert im.size == (r["width"], r["height"]), r
            assert im.format == ("PNG" if r["encoding"] == "png-named-jpg" else "JPEG"), r
            assert im.mode == modes.get(r["encoding"], "RGB"), r
    landscape = sum(r["width"] > r["height"] for r in drawn) / len(drawn)
    assert 0.55 <= landscape <= 0.85  # about 70% landscape, both orientations present


def test_every_dct_scale_boundary_has_images_on_both_sides_in_both_orientations(ci_rows: list[dict]) -> None:
    planned = [r for r in ci_rows if _planned(r) is not None]
    assert all(sorted((r["width"], r["height"])) == sorted(_planned(r)) for r in planned)  # stored turned if tagged
    sizes = {_planned(r) for r in planned}
    for short in BOUNDARY_SHORT_SIDES:
        orientations = {width > height for width, height in sizes if min(width, height) == short}
        assert orientations == {True, False}, f"short side {short}: landscape and portrait images expected"
    assert len(planned) <= 16, "a few planned sizes: ci stays small"


def test_every_split_holds_every_kind_of_file_at_its_share(ci_rows: list[dict]) -> None:
    for split in ("train", "val"):
        rows = [r for r in ci_rows if r["split"] == split]
        assert Counter(r["encoding"] for r in rows) == kind_counts(len(rows)), split
        assert set(kind_counts(len(rows))) == set(ENCODINGS)
    assert {r["encoding"] for r in ci_rows if r["split"] == "dirty"} == {BASELINE}
    # at the workshop's size each kind takes its share (rounded), the baseline what is left
    workshop = kind_counts(9000)
    assert all(workshop[kind] == max(1, round(share * 9000)) for kind, share in ENCODINGS.items() if kind != BASELINE)
    assert workshop[BASELINE] == 9000 - sum(count for kind, count in workshop.items() if kind != BASELINE)
    with pytest.raises(ValueError, match="cannot hold one file of each"):
        kind_counts(len(ENCODINGS) - 1)


def test_each_file_is_the_kind_the_manifest_says(ci_data: Path, ci_rows: list[dict]) -> None:
    """The header of every valid file says what the manifest says (loaderlab.images.file_kind reads it)."""
    for r in ci_rows:
        if r["status"] != "ok":
            continue
        tagged = r["encoding"] == "exif-orientation"
        assert (r["orientation"] != 0) == tagged, r
        expected = f"exif-orientation {r['orientation']}" if tagged else r["encoding"]
        assert file_kind((ci_data / r["path"]).read_bytes()) == expected, r
    tagged = [r["orientation"] for r in ci_rows if r["split"] == "train" and r["encoding"] == "exif-orientation"]
    assert sorted(tagged) == sorted(ORIENTATIONS), "ci's training split holds every orientation value 2-8 once"
    adobe = {r["encoding"]: r for r in ci_rows if r["encoding"].startswith("adobe-")}
    for encoding, transform in (("adobe-cmyk", 0), ("adobe-ycck", 2)):
        with Image.open(ci_data / adobe[encoding]["path"]) as im:
            assert im.info["adobe_transform"] == transform


def test_kinds_are_placed_by_the_seed() -> None:
    first = assign_kinds(200, np.random.default_rng([0, 0, build.KIND_STREAM]))
    assert first == assign_kinds(200, np.random.default_rng([0, 0, build.KIND_STREAM]))
    assert first != assign_kinds(200, np.random.default_rng([1, 0, build.KIND_STREAM]))


def test_same_seed_same_bytes_whatever_the_workers(ci_rows: list[dict], tmp_path: Path) -> None:
    build_dataset("ci", tmp_path / "again", workers=1, log=lambda msg: None)
    assert sha_list(read_manifest(tmp_path / "again")) == sha_list(ci_rows)


def test_other_seed_and_imbalance(ci_rows: list[dict], tmp_path: Path) -> None:
    out = tmp_path / "skewed"
    proc = run_cli("--profile", "ci", "--out", str(out), "--seed", "1", "--imbalance", "4", "--corrupt", "0",
                   "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "mean file size" in proc.stdout and "wall time" in proc.stdout
    rows = read_manifest(out)
    assert not (out / "dirty").exists()
    val = {r["path"]: r["sha256"] for r in rows if r["split"] == "val"}
    val0 = {r["path"]: r["sha256"] for r in ci_rows if r["split"] == "val"}
    assert val.keys() == val0.keys()
    assert all(val[p] != val0[p] for p in val)
    train = Counter(r["label"] for r in rows if r["split"] == "train")
    assert train[0] == CI.train_per_class and train[0] / train[9] == pytest.approx(4, rel=0.1)
    assert all(train[i] >= train[i + 1] for i in range(9))
    assert Counter(r["label"] for r in rows if r["split"] == "val") == {i: CI.val_per_class for i in range(10)}
    # no planned sizes where the classes are skewed: a balanced sampler would draw a rare class's large images
    # (up to 2048 px) ten times as often
    assert all(min(int(r["width"]), int(r["height"])) <= 600 for r in rows if r["split"] == "train")


def test_second_run_has_nothing_to_do(ci_data: Path) -> None:
    mtime = (ci_data / "dataset.json").stat().st_mtime_ns
    start = time.perf_counter()
    proc = run_cli("--profile", "ci", "--out", str(ci_data))
    assert time.perf_counter() - start < 2
    assert proc.returncode == 0, proc.stderr
    assert f"Dataset already complete at {ci_data} ({len(read_manifest(ci_data))} images); nothing to do." in proc.stdout
    assert (ci_data / "dataset.json").stat().st_mtime_ns == mtime


def test_other_parameters_exit_2(ci_data: Path) -> None:
    proc = run_cli("--profile", "ci", "--out", str(ci_data), "--seed", "7")
    assert proc.returncode == 2
    assert "other parameters" in proc.stderr and "--force" in proc.stderr
    assert '"seed": 0' in proc.stderr and '"seed": 7' in proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads((ci_data / "dataset.json").read_text())["parameters"]["seed"] == 0


def test_out_is_a_file_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "a_file"
    target.write_text("hello")
    proc = run_cli("--profile", "ci", "--out", str(target))
    assert proc.returncode == 2 and "existing file" in proc.stderr and "Traceback" not in proc.stderr
    assert target.read_text() == "hello"


@pytest.mark.parametrize(
    "args, message",
    [(["--imbalance", "0.5"], "--imbalance"), (["--corrupt", "-1"], "--corrupt"), (["--workers", "0"], "--workers")],
)
def test_bad_values_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str) -> None:
    assert cli.main(["--profile", "ci", "--out", str(tmp_path / "x"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_unknown_profile_exit_2() -> None:
    proc = run_cli("--profile", "huge")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_folder_with_foreign_files_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DataGenError, match="did not write"):
        build_dataset("ci", tmp_path, workers=1, log=lambda msg: None)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_half_written_folder_is_rebuilt(ci_data: Path, ci_rows: list[dict], tmp_path: Path) -> None:
    out = tmp_path / "partial"
    shutil.copytree(ci_data, out)
    (out / "dataset.json").unlink()
    first = out / ci_rows[0]["path"]
    first.write_bytes(first.read_bytes()[:100])
    (out / ci_rows[-1]["path"]).unlink()
    (out / "train" / "circles" / "circles_000000.jpg.tmp").write_bytes(b"junk")
    messages: list[str] = []
    result = build_dataset("ci", out, workers=2, log=messages.append)
    assert result.built and any("partial" in m for m in messages)
    assert sha_list(read_manifest(out)) == sha_list(ci_rows)
    assert not list(out.rglob("*.tmp"))
    assert (out / "dataset.json").is_file()


def test_force_rebuilds(ci_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "forced"
    shutil.copytree(ci_data, out)
    messages: list[str] = []
    result = build_dataset("ci", out, corrupt=0, workers=2, force=True, log=messages.append)
    assert result.built and any("--force" in m for m in messages)
    assert not (out / "dirty").exists()
    assert json.loads((out / "dataset.json").read_text())["parameters"]["corrupt"] == 0


def test_dirty_split(ci_data: Path, ci_rows: list[dict]) -> None:
    dirty = [r for r in ci_rows if r["split"] == "dirty"]
    statuses = Counter(r["status"] for r in dirty)
    assert statuses["ok"] == 3 * CI.corrupt and sum(statuses.values()) == 4 * CI.corrupt
    assert set(statuses) == {"ok", *KINDS}
    for r in dirty:
        path = ci_data / r["path"]
        if r["status"] == "ok":
            with Image.open(path) as im:
                assert im.convert("RGB").size == (r["width"], r["height"])
        else:
            assert r["width"] == r["height"] == 0
            with pytest.raises(Exception):
                with Image.open(path) as im:
                    im.convert("RGB")
    empty = [r for r in dirty if r["status"] == "empty"]
    assert all(r["bytes"] == 0 for r in empty)
    # broken files are spread among the valid ones, not all at the end of a class folder
    for name in CLASSES:
        order = [r["status"] for r in dirty if r["class_name"] == name]
        broken = [i for i, s in enumerate(order) if s != "ok"]
        assert broken and broken[0] < max(i for i, s in enumerate(order) if s == "ok")


def test_full_disk_leaves_no_dataset_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    def no_space(self: Path, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", no_space)
    out = tmp_path / "full_disk"
    assert cli.main(["--profile", "ci", "--out", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "could not write" in err and "No space left on device" in err and "choose another --out" in err
    assert not (out / "dataset.json").exists()


def test_too_little_space_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(build.shutil, "disk_usage", lambda path: SimpleNamespace(total=10**6, used=10**6 - 1000, free=1000))
    with pytest.raises(DataGenError, match="not enough free space"):
        build_dataset("ci", tmp_path / "small", workers=1, log=lambda msg: None)
    assert not (tmp_path / "small" / "dataset.json").exists()
