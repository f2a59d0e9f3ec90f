"""Module 06 (sharded formats): errata 6 and 10 of issue 12, LMDB read the right way, the format helpers of
`loaderlab.lessons.m06_formats`, the notebook's shape (one format per cell, time stated) and the quiz."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from torch.utils.data import DataLoader

from grader import quiz
from loaderlab.lessons import m06_formats as formats
from loaderlab.lessons.m06_formats import LMDBSamples, disk_bytes, lmdb_keys, sample_key, write_lmdb
from loaderlab.images import list_samples
from loaderlab.paths import REPO_ROOT, dataset_dir

NOTEBOOK = REPO_ROOT / "notebooks" / "06_sharded_formats.ipynb"


def _cells(kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == kind]


@pytest.fixture(scope="module")
def samples() -> list:
    everything = list_samples(dataset_dir("ci") / "train")
    return everything[:: max(1, len(everything) // 12)][:12]


# ---- erratum 10: st_blocks is POSIX only ---------------------------------------------------------------------

def test_disk_bytes_uses_blocks_where_the_os_has_them(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 5000)
    expected = path.stat().st_blocks * 512 if hasattr(path.stat(), "st_blocks") else 5000
    assert disk_bytes(path) == expected


def test_disk_bytes_falls_back_to_the_size_without_st_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Windows `os.stat_result` has no st_blocks: reading it there raised AttributeError (the old notebook)."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 5000)
    windows_like = SimpleNamespace(st_size=5000)  # what Windows reports: no st_blocks attribute
    monkeypatch.setattr(Path, "stat", lambda self, **_: windows_like)
    assert disk_bytes(path) == 5000


def test_the_notebook_reads_st_blocks_only_through_the_guard() -> None:
    assert not any("st_blocks" in source for source in _cells("code")), "use loaderlab.lessons.m06_formats.disk_bytes"


# ---- erratum 6: what a small file costs, by storage --------------------------------------------------------

def test_the_notebook_says_which_storage_pays_a_seek_and_what_the_emulation_models() -> None:
    prose = "\n".join(_cells("markdown"))
    for needed in ("spinning disk", "SSD", "IOPS", "metadata", "network storage", "`loaderlab.sim.SlowStorage` models"):
        assert needed in prose, f"notebook 06 must say {needed!r} where it explains what a small file costs"
    assert "costs a seek)" not in prose, "the unqualified 'each small file costs a seek' is erratum 6"


# ---- the notebook's shape ----------------------------------------------------------------------------------

def test_the_notebook_has_one_format_per_cell_and_no_long_cell() -> None:
    code = _cells("code")
    longest = max(len(source.splitlines()) for source in code)
    assert longest <= 60, f"notebook 06 has a {longest}-line code cell: one technique or format per cell"
    for name in ("TFRecord", "WebDataset tar", "NumPy uint8 crops", "HDF5", "LMDB"):
        measuring = [s for s in code if f'measure_format(\n    "{name}"' in s or f'measure_format("{name}"' in s]
        assert len(measuring) == 1, f"{name}: one cell measures it ({len(measuring)} found)"


def test_the_notebook_states_its_time_and_ends_with_the_next_exercise() -> None:
    markdown = _cells("markdown")
    assert "**Time:**" in markdown[0] and "2-core" in markdown[0] and "TIME_" not in markdown[0]
    assert "ex08" in markdown[-1] and "07_feeding_the_gpu.ipynb" in markdown[-1] and "grader.quiz 06" in markdown[-1]


def test_the_notebook_has_a_myths_box_on_lmdb() -> None:
    box = next((m for m in _cells("markdown") if "**Myths" in m), "")
    assert "iternames()" in box and "readonly=True, lock=False" in box and "__init__" in box


# ---- LMDB read the right way -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lmdb_dir(samples: list, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lmdb") / "db"
    write_lmdb(samples, path)
    return path


def test_lmdb_keys_lists_every_key_in_key_order(samples: list, lmdb_dir: Path) -> None:
    assert [bytes(k).decode() for k in lmdb_keys(lmdb_dir)] == sorted(sample_key(s) for s in samples)


def test_no_iternames_anywhere() -> None:
    """py-lmdb has no iternames(); the seeds' recipe used it."""
    import lmdb

    assert not hasattr(lmdb.Cursor, "iternames")
    source = (REPO_ROOT / "loaderlab" / "lessons" / "m06_formats.py").read_text() + "\n".join(_cells("code"))
    assert ".iternames(" not in source


@pytest.mark.parametrize("open_mode", ["per_worker", "per_item"])
def test_lmdb_samples_give_every_sample_once_with_its_bytes(samples: list, lmdb_dir: Path, open_mode: str) -> None:
    expected = sorted((s.path.read_bytes(), s.label) for s in samples)
    data = LMDBSamples(lmdb_dir, open_mode=open_mode)
    assert sorted(data[i] for i in range(len(data))) == expected
    data.close()
    assert sorted(tuple(item) for item in DataLoader(data, batch_size=None, num_workers=2)) == expected  # lists, collated


def test_the_rule_opens_no_environment_in_the_parent_and_pickles_without_one(lmdb_dir: Path) -> None:
    data = LMDBSamples(lmdb_dir)
    assert data._env is None
    data[0]
    assert data._env is not None
    assert pickle.loads(pickle.dumps(data))._env is None  # spawn sends no handle
    data.close()


def test_the_recipe_cannot_be_pickled_for_spawn(lmdb_dir: Path) -> None:
    recipe = LMDBSamples(lmdb_dir, open_mode="in_init")
    try:
        with pytest.raises(TypeError):
            pickle.dumps(recipe)
    finally:
        recipe.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_an_environment_opened_in_the_parent_is_refused_in_a_forked_worker(lmdb_dir: Path) -> None:
    data = LMDBSamples(lmdb_dir)
    data[0]  # the parent opens its own environment, then forgets close()
    try:
        outcome, items = formats.loader_outcome(
            lambda: DataLoader(data, batch_size=None, num_workers=1, multiprocessing_context="fork"))
    finally:
        data.close()
    assert items == 0 and "RuntimeError" in outcome and "close()" in outcome


def test_lmdb_samples_name_a_folder_without_an_environment(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        LMDBSamples(tmp_path)
    with pytest.raises(ValueError, match="open_mode"):
        LMDBSamples(tmp_path, open_mode="shared")  # type: ignore[arg-type]


# ---- the other format helpers ------------------------------------------------------------------------------

def test_tfrecord_records_splits_the_framing_and_refuses_a_cut(tmp_path: Path) -> None:
    records = [b"first", b"", b"x" * 300]
    data = b"".join(struct.pack("<Q", len(r)) + b"crc4" + r + b"crc4" for r in records)
    assert list(formats.tfrecord_records(data)) == records
    with pytest.raises(ValueError, match="cut short"):
        list(formats.tfrecord_records(data[:-3]))


def test_tar_members_reads_an_archive_from_memory() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, payload in [("a/b.jpg", b"\xff\xd8jpeg"), ("a/b.cls", b"3")]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    assert list(formats.tar_members(buffer.getvalue())) == [("a/b.jpg", b"\xff\xd8jpeg"), ("a/b.cls", b"3")]


def test_hdf5_round_trip_from_a_buffer(samples: list, tmp_path: Path) -> None:
    [path] = formats.write_hdf5(samples, tmp_path / "x.h5")
    assert formats.read_hdf5_buffer(path.read_bytes()) == [(s.path.read_bytes(), s.label) for s in samples]


def test_measure_format_checks_the_record_count(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"1234")
    row = formats.measure_format("fake", [path], 0.5, 3, local_read=lambda: [1, 2, 3], remote_read=lambda: [1, 2, 3])
    assert row.files == 1 and row.write_s == 0.5 and row.local_per_s > 0 and row.remote_per_s > 0
    with pytest.raises(AssertionError, match="fake: the local read returned 2"):
        formats.measure_format("fake", [path], None, 3, local_read=lambda: [1, 2])


# ---- the quiz ------------------------------------------------------------------------------------------------

def test_quiz_06_has_five_to_eight_questions_each_with_a_why() -> None:
    loaded = quiz.load("06")
    assert 5 <= len(loaded.questions) <= 8
    assert all(len(q.why) > 80 for q in loaded.questions)
