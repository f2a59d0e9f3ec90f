"""Module 07 (feeding the GPU): the decoder adapter and measuring helpers in loaderlab.device, the rules its graders
follow without a GPU (CUDA-only checks skipped with a reason, CUDA-only planted defects marked), and no TensorFlow on
its path. What needs a GPU is not tested here."""

from __future__ import annotations

import inspect
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from grader.checks import ex09_device_prefetcher, ex10_gpu_decode
from loaderlab import device
from loaderlab.lessons import m07_device
from loaderlab.images import CorruptImage, list_samples
from loaderlab.paths import REPO_ROOT, dataset_dir
from loaderlab.trace import Tracer

EXERCISES = {"ex09_device_prefetcher": ex09_device_prefetcher, "ex10_gpu_decode": ex10_gpu_decode}


def _jpegs(count: int) -> list[bytes]:
    return [s.path.read_bytes() for s in list_samples(dataset_dir() / "train")[:count]]


def test_decode_jpegs_decodes_a_batch_as_pillow_does() -> None:
    data = _jpegs(3)
    images = device.decode_jpegs(data, "cpu")
    assert len(images) == 3
    for image, jpeg in zip(images, data):
        pillow = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")).transpose(2, 0, 1)
        assert image.dtype == torch.uint8 and tuple(image.shape) == pillow.shape
        assert np.abs(image.numpy().astype(int) - pillow).mean() < 0.5
    assert device.decode_jpegs([], "cpu") == []


def test_decode_jpegs_names_the_sample_that_does_not_decode() -> None:
    good = _jpegs(1)[0]
    with pytest.raises(CorruptImage, match="circles/broken"):
        device.decode_jpegs([good, b"<html>not found</html>"], "cpu", names=["circles/fine", "circles/broken"])
    with pytest.raises(CorruptImage, match="empty file"):
        device.decode_jpegs([b""], "cpu")
    with pytest.raises(ValueError, match="names"):
        device.decode_jpegs([good], "cpu", names=["a", "b"])


def test_the_adapter_says_which_decoder_it_uses() -> None:
    said = device.jpeg_decoder("cpu")
    assert ("torchvision" in said or "Pillow" in said) and "CPU" in said


def test_without_cuda_there_is_a_reason_to_print() -> None:
    reason = device.cuda_missing_reason()
    assert (reason is None) == torch.cuda.is_available()
    if reason:
        assert "CUDA" in reason and torch.__version__ in reason
    assert device.default_device().type in ("cuda", "mps", "cpu")
    assert device.describe_device("cpu").startswith("CPU")


def test_batched_crop_and_flip_equal_the_per_sample_ones() -> None:
    generator = torch.Generator().manual_seed(3)
    batch = torch.randint(0, 256, (6, 3, 40, 50), dtype=torch.uint8, generator=generator)
    tops, lefts, flips = m07_device.crop_flip_draws(6, 40, 50, 32, generator)
    per_sample = m07_device.crop_flip_per_sample(batch.permute(0, 2, 3, 1).numpy(), 32, tops, lefts, flips)
    batched = m07_device.crop_flip_batch(batch, 32, tops, lefts, flips)
    assert np.array_equal(per_sample, batched.permute(0, 2, 3, 1).numpy())
    assert flips.any() and not flips.all()  # the seed draws both, so both paths are exercised


def test_the_emulated_timeline_overlaps_copies_with_steps() -> None:
    serial, overlapped = Tracer(), Tracer()
    serial_s = m07_device.emulated_copy_compute(4, copy_ms=30, step_ms=30, overlap=False, tracer=serial)
    overlapped_s = m07_device.emulated_copy_compute(4, copy_ms=30, step_ms=30, overlap=True, tracer=overlapped)
    assert overlapped_s < 0.85 * serial_s
    for tracer in (serial, overlapped):
        assert sorted({s.name for s in tracer.spans}) == ["copy", "step"] and len(tracer.spans) == 8


def test_reference_figures_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(m07_device, "REFERENCE_DIR", tmp_path)
    assert m07_device.reference_figures("07") == []
    path = m07_device.save_reference_figures("07", {"H2D pinned GB/s, 64 MB": 1.5}, "ci", "cpu")
    (record,) = m07_device.reference_figures("07")
    assert path.parent == tmp_path and path.name.startswith("07_")
    assert record["figures"] == {"H2D pinned GB/s, 64 MB": 1.5} and record["torch"] == torch.__version__
    assert {"device", "date", "profile", "torchvision"} <= set(json.loads(path.read_text()))


def test_no_gpu_reference_is_committed_without_its_measurement() -> None:
    """notebooks/reference/ holds a README and files the notebook wrote on a GPU (each with its device and date)."""
    for path in (REPO_ROOT / "notebooks" / "reference").glob("*.json"):
        record = json.loads(path.read_text())
        assert {"device", "torch", "date", "figures"} <= set(record), f"{path.name} lacks what says where it was measured"


def test_module_07_imports_no_tensorflow() -> None:
    code = ("import sys, loaderlab.device, solutions.ex09_device_prefetcher, solutions.ex10_gpu_decode, "
            "exercises.ex09_device_prefetcher, exercises.ex10_gpu_decode, grader.checks.ex09_device_prefetcher, "
            "grader.checks.ex10_gpu_decode; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras', 'webdataset', 'h5py', 'lmdb')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"module 07 must run on torch, torchvision, numpy and Pillow alone: {done.stdout}"


def test_notebook_07_labels_gpu_figures_and_says_when_there_are_none() -> None:
    cells = json.loads((REPO_ROOT / "notebooks" / "07_feeding_the_gpu.ipynb").read_text())["cells"]
    source = "".join("".join(c["source"]) for c in cells)
    assert "measured on {r['device']}" in source and "No GPU reference has been measured yet" in source
    assert "[skipped]" in source and "dev.cuda_missing_reason()" in source
    assert "import tensorflow" not in source


def test_gpu_reference_runs_notebook_code_without_jupyter() -> None:
    """`python -m tests.gpu_reference` finds a module's notebook, leaves IPython's % lines out, and refuses to
    record reference figures where there is no CUDA GPU."""
    from tests import gpu_reference

    cells = gpu_reference.code_cells(gpu_reference.notebook_for("07"))
    assert cells and not any(line.lstrip().startswith("%") for cell in cells for line in cell.splitlines())
    for number, source in enumerate(cells):
        compile(source, f"07 code cell {number}", "exec")
    with pytest.raises(SystemExit, match="expected one"):
        gpu_reference.notebook_for("99")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="CUDA GPU"):
            gpu_reference.main(["07"])


def _notebook_07_text() -> str:
    cells = json.loads((REPO_ROOT / "notebooks" / "07_feeding_the_gpu.ipynb").read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]).split()) for c in cells)


def test_an_ex10_reference_ratio_is_shown_with_its_setting() -> None:
    """The H100's "ex10: device decode vs CPU workers = 2.32" (48 images, a new DataLoader each epoch, exercise 04's
    solution as the baseline) was printed without its setting, and on a GPU in the row of a 400-image figure against
    another baseline. The notebook now prints every ex10 reference ratio with its setting, and apart from this run's
    row where the settings differ."""
    first = {"figures": {"ex10: device decode vs CPU workers": 2.32}}
    assert "48 images" in m07_device.figure_setting(first, "ex10: device decode vs CPU workers")
    later = {"figures": {"ex10: device decode vs CPU workers": 3.0, "ex10: timed setting": "400 images, batches of 64"}}
    assert m07_device.figure_setting(later, "ex10: device decode vs CPU workers") == "400 images, batches of 64"
    assert m07_device.figure_setting(later, "H2D pinned GB/s, 64 MB") is None
    text = _notebook_07_text()
    assert text.count("lesson.figure_setting(ref, name)") == 2, "reference() and the closing table both show the setting"
    assert "another setting: below" in text


def test_notebook_07_says_what_cuda_graph_trees_do_with_inputs_and_sizes() -> None:
    """Review N6: under mode="reduce-overhead" the graph trees copy the inputs themselves and record a graph per size;
    the static-buffer copy is the manual torch.cuda.graph case; mark_dynamic saves a recompile, not the extra graph."""
    text = _notebook_07_text()
    assert "a prefetcher must copy each batch into those static buffers" not in text
    assert "torch.cuda.graph" in text and "recording a new graph for each distinct input size" in text
    assert "saves the recompilation a new size costs, not that extra graph" in text
    assert "That is what kills overlap" not in text  # review N11: CUDA says the driver "may" synchronise; unmeasured


def test_the_cuda_graph_trees_claims_hold_in_the_pinned_torch() -> None:
    """What notebook 07 quotes from torch 2.14.1's inductor sources is still there."""
    import torch._inductor.cudagraph_trees as trees
    import torch._inductor.cudagraph_utils as utils

    assert "_foreach_copy_" in inspect.getsource(trees.CUDAGraphNode._copy_inputs_and_remove_from_src)
    warning = re.sub(r'"\s*"', "", inspect.getsource(utils.maybe_warning_due_to_dynamic_shape))  # its literals joined
    assert "recording a new graph for each distinct input size" in warning
    assert "fn_cache[int_key] = fn" in inspect.getsource(trees.cudagraphify_impl)
