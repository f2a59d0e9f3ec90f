"""The shared helpers: measuring, emulation, tracing, plots, paths, images, doctor, hints, runner."""

from __future__ import annotations

import time
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from grader import hints, preload  # noqa: E402
from grader.results import ERROR, TIMEOUT  # noqa: E402
from grader.runner import run_check  # noqa: E402
from loaderlab import bench, plots, sim, trace  # noqa: E402
from loaderlab.tools import doctor
from loaderlab.images import CorruptImage, broken_files, decode_rgb, list_samples, reference_crop  # noqa: E402
from loaderlab.paths import REPO_ROOT, DatasetMissing, dataset_dir  # noqa: E402


def sleepy(count: int, seconds: float):
    for index in range(count):
        time.sleep(seconds)
        yield index


# ---- bench --------------------------------------------------------------------------

def test_measure_counts_items_and_time() -> None:
    result = bench.measure(lambda: sleepy(10, 0.01))
    assert result.items == 10 and 0.09 <= result.seconds < 0.5
    assert 20 < result.items_per_s <= 112


def test_measure_skips_warmup_and_stops_at_max_items() -> None:
    result = bench.measure(lambda: sleepy(100, 0.002), warmup_items=5, max_items=10)
    assert result.items == 10


def test_measure_counts_batches_by_length() -> None:
    batches = [(np.zeros((4, 2)), np.zeros(4)), (np.zeros((3, 2)), np.zeros(3))]
    assert bench.measure(lambda: iter(batches), count=bench.count_batch).items == 7


def test_measure_closes_the_iterable() -> None:
    closed = []

    def generator():
        try:
            yield from range(100)
        finally:
            closed.append(True)

    bench.measure(generator, max_items=3)
    assert closed == [True]


def tagged(order: list[str], tag: str, delay: float):
    """An iterable factory that notes each pass in `order`."""
    def make():
        order.append(tag)
        return sleepy(5, delay)
    return make


def test_compare_reports_the_median_ratio_of_interleaved_rounds() -> None:
    order: list[str] = []
    result = bench.compare(tagged(order, "b", 0.008), tagged(order, "c", 0.002), rounds=3, warmup_rounds=1)
    assert order == ["b", "c"] * 4, "warm-up then interleaved baseline, candidate rounds"
    assert 2.5 < result.ratio < 5.0 and result.passed is None and result.rounds == 3
    assert result.ratio_min <= result.ratio <= result.ratio_max
    assert "x" in result.row() and result.to_dict()["passed"] is None


def test_verdict_is_settled_once_a_majority_of_rounds_sits_on_one_side() -> None:
    assert not bench.verdict_settled([3.0, 3.0], 5, 2.0)
    assert bench.verdict_settled([3.0, 1.0, 3.0, 3.0], 5, 2.0)
    assert bench.verdict_settled([1.0, 1.0, 1.0], 5, 2.0)
    assert bench.verdict_settled([2.0, 2.0], 3, 2.0), "a ratio equal to the target passes"
    assert not bench.verdict_settled([3.0, 3.0, 3.0], 4, 2.0), "even counts average two middle ratios"
    assert not bench.verdict_settled([3.0, 3.0, 3.0], 5, None)


def test_compare_stops_when_the_remaining_rounds_cannot_change_the_verdict() -> None:
    for target, passed in ((2.0, True), (9.0, False)):
        order: list[str] = []
        result = bench.compare(tagged(order, "b", 0.008), tagged(order, "c", 0.002), rounds=5, target=target)
        assert order == ["b", "c"] * 4, "warm-up, then 3 of 5 rounds settle it"
        assert result.passed is passed and result.rounds == 3 and result.rounds_planned == 5


def test_a_lower_free_core_target_unsettles_a_failing_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([2.0, 1.0])  # before the rounds, then after: the machine got busy
    monkeypatch.setattr(bench, "free_cores", lambda: next(readings))
    order: list[str] = []
    result = bench.compare(tagged(order, "b", 0.008), tagged(order, "c", 0.002), rounds=3, warmup_rounds=0,
                           target_for_free_cores=lambda free: 9.0 if free > 1.5 else 2.0)
    assert result.free_cores == 1.0 and result.target == 2.0 and result.passed, \
        "two rounds settle a fail against 9.0; the figure after them lowers the target, and the verdict follows it"
    assert result.rounds == 2


def test_a_ceiling_is_measured_in_every_round_and_sets_the_target() -> None:
    order: list[str] = []
    result = bench.compare(tagged(order, "b", 0.008), tagged(order, "c", 0.004), rounds=3, warmup_rounds=1,
                           ceiling=tagged(order, "p", 0.002), target_for_ceiling=lambda ceiling: ceiling / 2)
    assert order == ["b", "c", "p"] * 4, "warm-up then baseline, candidate, ceiling in each round, all rounds run"
    assert 2.5 < result.ceiling < 5.0 and result.target == result.ceiling / 2 and result.rounds == 3
    with pytest.raises(ValueError, match="together"):
        bench.compare(tagged(order, "b", 0.0), tagged(order, "c", 0.0), ceiling=tagged(order, "p", 0.0))


# ---- sim and trace --------------------------------------------------------------------

def test_slow_storage_waits_per_request(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 1_000_000)
    storage = sim.SlowStorage(latency_ms=20, bandwidth_mb_s=100)
    start = time.perf_counter()
    assert storage.read(path) == path.read_bytes()
    assert storage.read_range(path, 10, 5) == b"xxxxx"
    assert time.perf_counter() - start >= 0.020 * 2 + 0.01
    assert storage.requests == 2 and storage.bytes_read == 1_000_005


def test_simulated_gpu_reports_utilization_and_records_spans() -> None:
    tracer = trace.Tracer()
    gpu = sim.SimulatedGPU(step_ms=10, tracer=tracer)
    report = gpu.train(sleepy(5, 0.010))
    assert report.steps == 5
    assert 0.3 < report.utilization < 0.7, "load 10 ms + step 10 ms: busy about half the time"
    assert {"step", "wait"} <= set(tracer.seconds_by_stage())
    assert "steps/s" in str(report)


def test_gil_bound_transform_is_deterministic_and_small() -> None:
    image = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    out = sim.gil_bound_transform(image, iterations=5000)
    assert out.dtype == np.uint8 and out.shape == image.shape
    assert np.array_equal(out, sim.gil_bound_transform(image, iterations=5000))
    assert np.abs(out.astype(int) - image.astype(int)).max() <= 8


def test_trace_span_is_a_no_op_without_a_tracer() -> None:
    with trace.span(None, "decode"):
        pass
    tracer = trace.Tracer()
    with trace.span(tracer, "decode"):
        time.sleep(0.005)
    assert tracer.spans[0].name == "decode" and tracer.spans[0].lane == "MainThread"
    assert tracer.seconds_by_stage()["decode"] >= 0.004


def test_plots_draw_without_errors() -> None:
    tracer = trace.Tracer()
    tracer.add("read", 0.0, 0.1, lane="loader")
    tracer.add("step", 0.1, 0.3, lane="accelerator")
    assert plots.timeline(tracer, title="t").get_title() == "t"
    plots.stage_breakdown({"read": 1.0, "decode": 3.0})
    plots.throughput_vs_workers([0, 1, 2], [10.0, 18.0, 20.0], cores=2)
    plots.utilization_bars({"naive": 0.4, "prefetched": 0.95})
    matplotlib.pyplot.close("all")


# ---- paths and images ---------------------------------------------------------------------

def test_missing_dataset_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import data_gen

    monkeypatch.setattr(data_gen, "default_out_dir", lambda profile, imbalance=1.0: tmp_path / "absent")
    with pytest.raises(DatasetMissing, match="python -m data_gen --profile full --imbalance 3"):
        dataset_dir("full", imbalance=3)
    with pytest.raises(DatasetMissing, match="`make data`"):
        dataset_dir("workshop")


def test_list_samples_explains_bad_folders(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        list_samples(tmp_path / "nope")
    (tmp_path / "split").mkdir()
    with pytest.raises(FileNotFoundError, match="no class folders"):
        list_samples(tmp_path / "split")
    (tmp_path / "split" / "cats").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no images"):
        list_samples(tmp_path / "split")


def test_samples_are_sorted_with_imagefolder_labels() -> None:
    samples = list_samples(dataset_dir() / "train")
    assert samples == sorted(samples, key=lambda s: (s.label, s.path.name))
    assert sorted({s.label for s in samples}) == list(range(10))


def test_reference_crop_matches_torchvision() -> None:
    from PIL import Image
    from torchvision import transforms

    path = list_samples(dataset_dir() / "train")[0].path
    expected = np.asarray(transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])(Image.open(path).convert("RGB")))
    assert np.array_equal(reference_crop(path), expected)


def test_center_crop_folder_serves_reference_crops_and_labels() -> None:
    from loaderlab.torchdata import CenterCropFolder

    samples = list_samples(dataset_dir() / "train")
    dataset = CenterCropFolder(dataset_dir() / "train")
    image, label = dataset[len(dataset) - 1]
    assert len(dataset) == len(samples) and dataset.targets == [s.label for s in samples]
    assert label == samples[-1].label
    assert np.array_equal(image.numpy(), reference_crop(samples[-1].path).transpose(2, 0, 1))


def test_every_planted_broken_file_raises_a_clear_error() -> None:
    broken = broken_files(dataset_dir())
    assert broken
    for path, kind in broken.items():
        with pytest.raises(CorruptImage) as info:
            decode_rgb(path)
        assert path.name in str(info.value)
        if kind == "empty":
            assert "empty file" in str(info.value)


# ---- doctor, hints, runner ------------------------------------------------------------------

def test_doctor_reports_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "shm_bytes", lambda: 64 * 2**20)
    monkeypatch.setattr(doctor, "usable_cores", lambda: 1)
    report = doctor.diagnose(import_packages=False)
    labels = [label for label, _ in report.facts]
    assert {"usable cores", "/dev/shm", "start method", "free disk"} <= set(labels)
    text = str(report)
    assert "--shm-size" in text and "only 1 usable core" in text


def test_every_graded_exercise_has_climbing_hints() -> None:
    graded = {p.stem.removeprefix("test_") for p in (REPO_ROOT / "grader").glob("test_ex*.py")}
    assert graded <= set(hints.all_hints())
    for name in graded:
        assert len(hints.all_hints()[name]) >= 3, f"{name}: give at least three hints, from nudge to near-answer"
    assert hints.resolve("ex02") == "ex02_threaded_prefetch"
    assert hints.hint("ex02", 99) == hints.all_hints()["ex02_threaded_prefetch"][-1]


@pytest.mark.parametrize("fresh_interpreter", ["0", "1"], ids=["forked from a waiting process", "fresh interpreter"])
def test_runner_stops_a_hanging_check_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  fresh_interpreter: str) -> None:
    monkeypatch.setenv(preload.FRESH_INTERPRETER_ENV, fresh_interpreter)
    (tmp_path / "ex02_threaded_prefetch.py").write_text(
        "import time\nclass ThreadedPrefetcher:\n    def __init__(self, *a, **k):\n        time.sleep(600)\n")
    result = run_check(tmp_path, "ex02_threaded_prefetch", "prefetcher_yields_every_item_in_order", timeout_s=5)
    assert result.status == TIMEOUT and "did not finish within 5 s" in result.message


def test_runner_explains_a_missing_file_and_an_import_error(tmp_path: Path) -> None:
    result = run_check(tmp_path, "ex02_threaded_prefetch", "threaded_map_keeps_order", timeout_s=30)
    assert result.status == ERROR and "MISSING FILE" in result.message
    (tmp_path / "ex02_threaded_prefetch.py").write_text("import not_a_module_anywhere\n")
    result = run_check(tmp_path, "ex02_threaded_prefetch", "threaded_map_keeps_order", timeout_s=30)
    assert result.status == ERROR and "not_a_module_anywhere" in result.message


def test_runner_names_a_missing_function(tmp_path: Path) -> None:
    (tmp_path / "ex02_threaded_prefetch.py").write_text("def thread_map(*a):\n    pass\n")
    result = run_check(tmp_path, "ex02_threaded_prefetch", "threaded_map_keeps_order", timeout_s=30)
    assert result.status == "fail" and "MISSING" in result.message and "`threaded_map`" in result.message
