"""Module 04's notebooks and their helpers: the errata stay fixed, the claims the notebooks teach hold.

The notebooks themselves run under `pytest --nbval-lax`; these tests check their text and code for the
errors of issue 12, and the behaviour of `loaderlab.lessons.m04_dataloading` and `loaderlab.lessons.m04_pitfalls` that they
rely on, on small synthetic data (no JPEG decoding, a few seconds in all).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from grader import quiz
from loaderlab.lessons import m04_dataloading as dl
from loaderlab.lessons import m04_pitfalls as pitfalls
from loaderlab.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("04*.ipynb"))
MAX_CODE_LINES = 50  # one technique per cell; a cell longer than this holds several or belongs in loaderlab/


def cells(path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def test_module_04_notebooks_sort_together_before_05() -> None:
    names = sorted(p.name for p in (REPO_ROOT / "notebooks").glob("*.ipynb"))
    first = names.index("04_dataloader_tuning.ipynb")
    assert names[first + 1].startswith("04b_"), names
    assert first + 2 == len(names) or names[first + 2].startswith("05"), names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_says_how_long_it_takes(path) -> None:
    first = cells(path, "markdown")[0]
    assert "How long it takes" in first and re.search(r"\d+ s\b", first), f"{path.name}: state the measured run time"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_are_short(path) -> None:
    long = [i for i, source in enumerate(cells(path, "code")) if source.count("\n") + 1 > MAX_CODE_LINES]
    assert not long, f"{path.name}: code cells {long} exceed {MAX_CODE_LINES} lines; one technique per cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_fork_is_only_asked_for_where_it_exists(path) -> None:
    for source in cells(path, "code"):
        if '"fork"' in source:
            assert "get_all_start_methods()" in source, f"{path.name}: guard fork (Windows has none):\n{source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_erratum_of_issue_12_comes_back(path) -> None:
    text = "\n".join(cells(path, "markdown") + cells(path, "code"))
    assert "--profile ci --imbalance" not in text, f"{path.name}: the course's data is `make data` (workshop profile)"
    assert not re.search(r"worker id, new every epoch\)", text), f"{path.name}: seeds are not new every epoch " \
        "with persistent workers"
    assert "import albumentations" not in text, f"{path.name}: import it through dl.import_albumentations (guarded)"


def test_seed_erratum_is_explained_and_measured() -> None:
    text = "\n".join(cells(REPO_ROOT / "notebooks" / "04_dataloader_tuning.ipynb", "markdown"))
    assert "persistent_workers=True" in text and "**not** new every epoch" in text
    code = "\n".join(cells(REPO_ROOT / "notebooks" / "04_dataloader_tuning.ipynb", "code"))
    assert "pitfalls.WorkerSeeds" in code and "cold_and_steady_ips" in code


def test_quiz_04_has_five_to_eight_questions_grounded_in_the_notebooks() -> None:
    loaded = quiz.load("04")
    assert 5 <= len(loaded.questions) <= 8
    for question in loaded.questions:
        assert re.search(r"[Nn]otebook 04b?|[Ss]ection \d", question.text + question.why), question.text


# ---- what the notebooks teach, on synthetic data --------------------------------------------------------

def _images(count: int = 8, size: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (count, 3, size, size), dtype=np.uint8), np.arange(count, dtype=np.int64)


def _seeds_and_flips(persistent: bool, epochs: int = 3) -> list[tuple[set[int], set[int], list[int]]]:
    loader = DataLoader(pitfalls.WorkerSeeds(8), batch_size=2, num_workers=2, persistent_workers=persistent,
                        worker_init_fn=pitfalls.reseed_worker, generator=torch.Generator().manual_seed(0), timeout=60)
    runs = []
    for _ in range(epochs):
        rows = [[int(column[k]) for column in batch] for batch in loader for k in range(len(batch[0]))]
        runs.append(({row[2] for row in rows}, {row[3] for row in rows}, [row[4] for row in rows]))
    return runs


def test_persistent_workers_keep_their_processes_and_seeds_while_flips_change() -> None:
    persistent = _seeds_and_flips(True)
    assert len({pid for pids, _, _ in persistent for pid in pids}) == 2
    assert all(seeds == persistent[0][1] for _, seeds, _ in persistent), "seeds are drawn once per iterator"
    assert any(a[2] != b[2] for a, b in zip(persistent, persistent[1:])), "the generators go on drawing"
    fresh = _seeds_and_flips(False)
    assert len({seed for _, seeds, _ in fresh for seed in seeds}) == 6, "without persistence: new seeds every epoch"


def test_frozen_augmentation_repeats_and_per_access_flips_change() -> None:
    images, labels = _images(32)
    frozen, fresh = dl.FrozenAugmentation(images, labels), dl.InMemoryCrops(images, labels, augment=True)
    assert not np.array_equal(frozen.images, images), "the trap flips the cache itself"
    epochs = {name: [[torch.stack([d[i][0] for i in range(len(d))])] for _ in range(2)]
              for name, d in [("frozen", frozen), ("fresh", fresh)]}
    assert dl.share_unchanged(*epochs["frozen"]) == 1.0
    assert dl.share_unchanged(*epochs["fresh"]) < 0.9


def test_collate_into_uint8_equals_the_default_route() -> None:
    images, labels = _images()
    hwc = dl.DecodedHWC(images, labels)
    batch = [hwc[i] for i in range(len(hwc))]
    expected = default_collate([dl.to_chw_tensor(sample) for sample in batch])
    got = dl.collate_into_uint8(batch)
    assert got[0].dtype == torch.uint8 and torch.equal(got[0], expected[0]) and torch.equal(got[0], torch.from_numpy(images))
    assert got[1].dtype == torch.int64 and torch.equal(got[1], expected[1])


def test_collate_into_uint8_through_workers() -> None:
    images, labels = _images(12)
    loader = DataLoader(dl.DecodedHWC(images, labels), batch_size=5, num_workers=2,
                        collate_fn=dl.collate_into_uint8, timeout=60)
    assert torch.equal(torch.cat([x for x, _ in loader]), torch.from_numpy(images))


@pytest.mark.parametrize("split, copies", [(True, 1), (False, 2)])
def test_crop_stream_yields_each_sample_once_only_when_split_by_worker(split, copies) -> None:
    images, labels = _images(6)
    loader = DataLoader(dl.CropStream(images, labels, split_by_worker=split), batch_size=2, num_workers=2, timeout=60)
    seen = sorted(int(label) for _, batch_labels in loader for label in batch_labels)
    assert seen == sorted(list(range(6)) * copies)


def test_straggling_sleeps_only_on_every_nth_sample() -> None:
    images, labels = _images(4)
    straggling = dl.Straggling(dl.InMemoryCrops(images, labels), every=4, seconds=0.2)
    assert dl.ms_per_call(lambda i: straggling[i], [0, 1, 2]) < 100
    assert dl.ms_per_call(lambda i: straggling[i], [3, 3]) >= 190


def test_train_epoch_reports_waits_and_arrival_order() -> None:
    images, _ = _images(6)
    loader = DataLoader(dl.InMemoryCrops(images, np.arange(6)), batch_size=2)
    wall, waited, firsts = dl.train_epoch(loader, lambda batch: None)
    assert firsts == [0, 2, 4] and 0 <= waited <= wall


def test_cold_and_steady_ips_time_two_epochs() -> None:
    images, labels = _images(8)
    cold, steady = dl.cold_and_steady_ips(DataLoader(dl.InMemoryCrops(images, labels), batch_size=4), epochs=2)
    assert cold > 0 and steady > 0


def test_staged_folder_labels_every_stage(tmp_path) -> None:
    from PIL import Image

    from loaderlab.images import Sample
    from loaderlab.trace import Tracer

    path = tmp_path / "a.jpg"
    Image.fromarray(np.zeros((300, 260, 3), np.uint8)).save(path)
    tracer = Tracer()
    image, label = dl.StagedFolder([Sample(path, 3)], tracer=tracer)[0]
    assert image.shape == (3, 224, 224) and label == 3
    assert set(tracer.seconds_by_stage()) == {"read", "decode", "transform", "to tensor"}


def test_threads_here_reports_one_torch_thread_in_a_worker() -> None:
    threads, _ = next(iter(DataLoader(dl.ThreadsHere(), batch_size=None, num_workers=1, timeout=60)))
    assert threads == 1


def test_torch_threads_restores() -> None:
    before = torch.get_num_threads()
    with dl.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_albumentations_is_optional() -> None:
    module = dl.import_albumentations()
    assert module is None or hasattr(module, "Compose")
