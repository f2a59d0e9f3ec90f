"""Checks for exercise 01: stage profiling, and the sequential loader on clean and dirty data."""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import numpy as np

from grader.support import batch_layout, dataset_samples, require, within
from loaderlab.baselines import naive_batches
from loaderlab.bench import Comparison, compare, count_batch
from loaderlab.images import Sample, broken_files, list_samples, mean_abs_difference, reference_crop
from loaderlab.paths import dataset_dir

MEAN_TOLERANCE = 2.0   # mean |difference| over all images, in 0..255 levels (draft decoding moves a few)
WORST_TOLERANCE = 6.0  # for any one image
FAST_TARGET = 1.5      # measured 1.9-2.0x for draft + one-call crop-resize, 1.2x for uint8 alone


def _sleeper(name: str, ms: float):
    def stage(value: list[str]) -> list[str]:
        time.sleep(ms / 1000)
        return [*value, name]
    return stage


def profile_times_each_stage(ex: ModuleType) -> None:
    profile_stages = require(ex, "profile_stages")
    costs = {"read": 1.0, "decode": 6.0, "resize": 2.5, "collate": 0.5}
    stages = [(name, _sleeper(name, ms)) for name, ms in costs.items()]
    seen: list[list[str]] = []
    stages.append(("check", lambda value: seen.append(value) or value))
    totals = within(30, "profile_stages", lambda: profile_stages(stages, [[] for _ in range(20)]))
    assert seen and all(v == list(costs) for v in seen), (
        "each stage must receive the previous stage's output (read -> decode -> resize -> collate); "
        f"the last stage received {seen[:1]!r}")
    assert list(totals)[:4] == list(costs), f"keys must be the stage names in stage order, got {list(totals)}"
    for name, ms in costs.items():
        expected = 20 * ms / 1000
        assert 0.8 * expected <= totals[name] <= 1.3 * expected + 0.01, (
            f"stage {name!r} costs {ms} ms x 20 inputs = {expected:.3f} s, but you measured {totals[name]:.3f} s. "
            "Time each stage call on its own and add the times up per stage.")


def bottleneck_is_named(ex: ModuleType) -> None:
    find_bottleneck = require(ex, "find_bottleneck")
    for costs, slowest in [
        ({"read": 0.1, "decode": 0.9, "resize": 0.3}, "decode"),
        ({"read": 2.0, "decode": 0.9, "resize": 0.3}, "read"),
        ({"read": 0.1, "decode": 0.2, "resize": 0.3, "collate": 1.5}, "collate"),
    ]:
        got = find_bottleneck(costs)
        assert got == slowest, f"find_bottleneck({costs}) returned {got!r}; the slowest stage is {slowest!r}"


def _check_batches(batches: list[tuple[np.ndarray, np.ndarray]], samples: list[Sample], batch_size: int) -> None:
    images, labels = batch_layout(batches, len(samples), batch_size)
    assert labels == [s.label for s in samples], "labels are not the samples' labels in sample order"
    differences = [mean_abs_difference(image, reference_crop(s.path)) for image, s in zip(images, samples)]
    worst = int(np.argmax(differences))
    assert np.mean(differences) <= MEAN_TOLERANCE and differences[worst] <= WORST_TOLERANCE, (
        f"pixels differ from the reference crop by {np.mean(differences):.2f} levels on average (allowed "
        f"{MEAN_TOLERANCE}) and {differences[worst]:.2f} at worst (allowed {WORST_TOLERANCE}), worst at "
        f"{samples[worst].path.name}. Resize the short side to 256 and take the centre 224x224, in RGB.")


def batches_match_reference(ex: ModuleType) -> None:
    load_batches = require(ex, "load_batches")
    samples = dataset_samples("train", 40)
    batches = within(60, "load_batches", lambda: list(load_batches(samples, batch_size=16, skipped=[])))
    _check_batches(batches, samples, 16)


def dirty_files_are_skipped_and_reported(ex: ModuleType) -> None:
    load_batches = require(ex, "load_batches")
    samples = list_samples(dataset_dir() / "dirty")
    broken = broken_files(dataset_dir())
    skipped: list = []
    batches = within(60, "load_batches on the dirty split", lambda: list(load_batches(samples, batch_size=8, skipped=skipped)))
    reported = {Path(s.path) for s in skipped}
    missed = sorted(p.name for p in set(broken) - reported)
    wrongly = sorted(p.name for p in reported - set(broken))
    assert not missed and not wrongly, (
        f"{len(broken)} files in the dirty split are broken; `skipped` reported {len(reported)}. "
        f"Not reported: {missed[:5]}; reported but fine: {wrongly[:5]}. Append Skipped(path, reason) "
        "for every file you skip: a silent loss is the bug this exercise is about.")
    assert len(skipped) == len(broken), f"each broken file must be reported once, got {len(skipped)} reports"
    assert all(str(s.reason).strip() for s in skipped), "every Skipped needs a reason (e.g. the exception's message)"
    _check_batches(batches, [s for s in samples if s.path not in broken], 8)


def missing_file_raises(ex: ModuleType) -> None:
    load_batches = require(ex, "load_batches")
    samples = [*dataset_samples("train", 3), Sample(dataset_dir() / "train" / "no_such_file.jpg", 0)]
    try:
        within(30, "load_batches with a wrong path", lambda: list(load_batches(samples, batch_size=2, skipped=[])))
    except FileNotFoundError:
        return
    raise AssertionError("a path that does not exist was skipped quietly. A missing file means a wrong path or "
                         "a wrong sample list, not a bad image: let FileNotFoundError through.")


def faster_than_naive(ex: ModuleType) -> Comparison:
    load_batches = require(ex, "load_batches")
    samples = dataset_samples("train", 64)
    return compare(
        lambda: naive_batches(samples, batch_size=16),
        lambda: load_batches(samples, batch_size=16, skipped=[]),
        rounds=5, count=count_batch, name="sequential, cheap wins", baseline_name="naive loop",
        target=FAST_TARGET, unit="images",
    )
