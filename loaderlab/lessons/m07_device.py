"""Notebook 07's measurements (feeding the GPU), reused by notebook 08: host and host-to-device copies, the bus's
nominal limit, a copy/compute timeline on two CUDA streams and its emulation with sleeps for machines without a
GPU, the same random crop and flip per sample or for a whole batch on the device, and the reference figures
measured on GPUs (`notebooks/reference/`).

The device adapter and the CUDA timing the graders use are in `loaderlab.device`. Only torch, torchvision, numpy
and Pillow are imported here.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from loaderlab.device import default_device, describe_device
from loaderlab.paths import REPO_ROOT
from loaderlab.trace import Span, Tracer, span

REFERENCE_DIR = REPO_ROOT / "notebooks" / "reference"
# Per-lane, per-direction bandwidth of a PCIe link by generation, in GB/s after line encoding
# (8b/10b up to gen 2, 128b/130b for gens 3 to 5, FLIT mode for gen 6).
PCIE_LANE_GB_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


# ---- measuring copies ---------------------------------------------------------------------------

def host_copy_gb_s(nbytes: int, repeats: int = 5) -> float:
    """GB/s of one copy of `nbytes` between two host buffers (best of `repeats`): memory, not a bus."""
    source = torch.ones(nbytes, dtype=torch.uint8)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e9


def h2d_gb_s(nbytes: int, pinned: bool, device: torch.device | str | None = None, repeats: int = 5) -> float:
    """GB/s of one host-to-device copy of `nbytes` from pinned or pageable memory, wall clock (median)."""
    device = torch.device(device) if device is not None else torch.device("cuda")
    host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=pinned)
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    target.copy_(host)  # warm-up: allocations, the driver's staging buffers
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        target.copy_(host, non_blocking=pinned)
        torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times) / 1e9


def pin_seconds(nbytes: int) -> tuple[float, float]:
    """Seconds to pin `nbytes` of pageable memory: the first time (pinned memory is allocated) and the next
    time (the caching host allocator hands back the block it keeps)."""
    pageable = torch.ones(nbytes, dtype=torch.uint8)
    first_start = time.perf_counter()
    pinned = pageable.pin_memory()
    first = time.perf_counter() - first_start
    del pinned
    again_start = time.perf_counter()
    pinned = pageable.pin_memory()
    again = time.perf_counter() - again_start
    del pinned
    return first, again


def _nvidia_smi_rows(smi: str, gpu_id: str | None) -> list[list[int]]:
    command = [smi, "--query-gpu=pcie.link.gen.max,pcie.link.width.max", "--format=csv,noheader,nounits"]
    if gpu_id:
        command.append(f"--id={gpu_id}")
    output = subprocess.run(command, capture_output=True, text=True, timeout=10, check=True).stdout
    return [[int(part) for part in re.split(r"\s*,\s*", line.strip())] for line in output.strip().splitlines()]


def nominal_link_gb_s(device: torch.device | str | None = None) -> tuple[float, str] | None:
    """The host link's nominal GB/s per direction and how it was found (nvidia-smi's PCIe generation and
    width, the most this GPU and this machine support together), or None where that cannot be read."""
    device = torch.device(device) if device is not None else torch.device("cuda")
    smi = shutil.which("nvidia-smi")
    if smi is None or device.type != "cuda":
        return None
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    rows: list[list[int]] = []
    for gpu_id in ([uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"] if uuid else []) + [None]:
        try:
            rows = _nvidia_smi_rows(smi, gpu_id)
        except (OSError, subprocess.SubprocessError, ValueError):
            continue
        if gpu_id or len(rows) == 1:  # without an id, only a machine with one GPU says which is ours
            break
        rows = []
    if len(rows) != 1 or len(rows[0]) != 2 or rows[0][0] not in PCIE_LANE_GB_S:
        return None
    generation, width = rows[0]
    return PCIE_LANE_GB_S[generation] * width, f"PCIe gen {generation} x{width}, nominal (nvidia-smi)"


# ---- the copy of batch n+1 under the compute of batch n ----------------------------------------------

def cuda_copy_compute_spans(host_batches: Sequence[torch.Tensor], compute_cycles: int, overlap: bool,
                            device: torch.device | str | None = None) -> tuple[list[Span], float]:
    """Copy each (pinned) host batch to the device and 'compute' on it (a sleep kernel of `compute_cycles`):
    on one stream, or with the copies on a side stream. Returns spans on the GPU's clock, from CUDA events
    (lanes 'copy stream' and 'accelerator'), and the seconds from the first copy to the last step."""
    device = torch.device(device) if device is not None else torch.device("cuda")
    compute = torch.cuda.current_stream(device)
    copies = torch.cuda.Stream(device) if overlap else compute
    torch.cuda.synchronize(device)
    origin = torch.cuda.Event(enable_timing=True)
    origin.record(compute)
    if overlap:
        copies.wait_stream(compute)
    marks = []
    for host in host_batches:
        copy_start, copy_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        step_start, step_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(copies):
            copy_start.record(copies)
            on_device = host.to(device, non_blocking=True)
            copy_end.record(copies)
        if overlap:
            compute.wait_event(copy_end)
            on_device.record_stream(compute)
        step_start.record(compute)
        torch.cuda._sleep(compute_cycles)
        step_end.record(compute)
        marks.append((copy_start, copy_end, step_start, step_end))
    torch.cuda.synchronize(device)
    def seconds(event: torch.cuda.Event) -> float:
        return origin.elapsed_time(event) / 1000

    spans = []
    for copy_start, copy_end, step_start, step_end in marks:
        spans.append(Span("copy", "copy stream", seconds(copy_start), seconds(copy_end)))
        spans.append(Span("step", "accelerator", seconds(step_start), seconds(step_end)))
    return spans, max(s.end for s in spans) - min(s.start for s in spans)


def emulated_copy_compute(batches: int, copy_ms: float, step_ms: float, overlap: bool,
                          tracer: Tracer | None = None) -> float:
    """The same schedule without a GPU: sleeps stand for the copy engine and for the step.

    Serially, each batch is copied, then stepped. Overlapped, a 'copy engine' thread copies batch n+1
    while the step of batch n runs, holding at most two batches (two device buffers). Returns wall seconds;
    the spans go to `tracer` (lanes 'copy engine (emulated)' and 'accelerator'). This shows the schedule,
    not any hardware: the sleeps last what you ask.
    """
    copy_s, step_s = copy_ms / 1000, step_ms / 1000
    lane = "copy engine (emulated)"
    start = time.perf_counter()
    if not overlap:
        for _ in range(batches):
            with span(tracer, "copy", lane):
                time.sleep(copy_s)
            with span(tracer, "step", "accelerator"):
                time.sleep(step_s)
        return time.perf_counter() - start
    copied = [threading.Event() for _ in range(batches)]
    buffers = threading.Semaphore(2)

    def copy_engine() -> None:
        for number in range(batches):
            if not buffers.acquire(timeout=60):
                return
            with span(tracer, "copy", lane):
                time.sleep(copy_s)
            copied[number].set()

    engine = threading.Thread(target=copy_engine, name="emulated-copy-engine", daemon=True)
    engine.start()
    for number in range(batches):
        if not copied[number].wait(timeout=60):
            raise RuntimeError("the emulated copy engine stopped")
        with span(tracer, "step", "accelerator"):
            time.sleep(step_s)
        buffers.release()
    engine.join(timeout=60)
    return time.perf_counter() - start


# ---- augmentation: per sample, or per batch on the device ----------------------------------------------

def crop_flip_draws(count: int, height: int, width: int, size: int,
                    generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random `size` x `size` crop position and a coin flip for each of `count` images: (tops, lefts, flips)."""
    tops = torch.randint(0, height - size + 1, (count,), generator=generator)
    lefts = torch.randint(0, width - size + 1, (count,), generator=generator)
    flips = torch.rand(count, generator=generator) < 0.5
    return tops, lefts, flips


def crop_flip_per_sample(images: np.ndarray, size: int, tops: torch.Tensor, lefts: torch.Tensor,
                         flips: torch.Tensor) -> np.ndarray:
    """What a Dataset does item by item: crop and maybe mirror each (H, W, 3) uint8 image, then stack (collate)."""
    crops = []
    for image, top, left, flip in zip(images, tops.tolist(), lefts.tolist(), flips.tolist()):
        crop = image[top : top + size, left : left + size]
        crops.append(crop[:, ::-1] if flip else crop)
    return np.stack(crops)


def crop_flip_batch(images: torch.Tensor, size: int, tops: torch.Tensor, lefts: torch.Tensor,
                    flips: torch.Tensor) -> torch.Tensor:
    """The same crops and flips for a whole (N, C, H, W) batch in two gathers, on the batch's device."""
    count, channels, _, width = images.shape
    steps = torch.arange(size, device=images.device)
    rows = (tops.to(images.device)[:, None] + steps).view(count, 1, size, 1).expand(count, channels, size, width)
    picked = images.gather(2, rows)
    columns = torch.where(flips.to(images.device)[:, None], steps.flip(0), steps) + lefts.to(images.device)[:, None]
    return picked.gather(3, columns.view(count, 1, 1, size).expand(count, channels, size, size))


# ---- reference figures measured on a GPU ---------------------------------------------------------------

def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def reference_figures(module: str) -> list[dict[str, Any]]:
    """The reference figures measured for `module` ("07") on GPUs, one dict per `notebooks/reference/<module>_*.json`
    (keys: device, torch, torchvision, date, profile, figures)."""
    found = []
    for path in sorted(REFERENCE_DIR.glob(f"{module}_*.json")):
        found.append(json.loads(path.read_text(encoding="utf-8")) | {"file": path.name})
    return found


# Exercise 10's ratios depend on how they were timed; a reference file records that as "ex10: timed setting", except
# the first (H100, torch 2.11, 2026-11-22), timed by notebook 07's first version of the cell:
EX10_FIRST_SETTING = ("48 images in batches of 16, a new DataLoader each epoch, against exercise 04's solution, "
                      "2 workers each")


def figure_setting(record: dict[str, Any], name: str) -> str | None:
    """The setting `record`'s figure `name` was timed in, where the figure depends on one (exercise 10's ratios over a
    CPU loader), else None: such a figure is shown with its setting, never in a row beside one of another setting."""
    if not name.startswith("ex10: device decode vs"):
        return None
    return str(record["figures"].get("ex10: timed setting", EX10_FIRST_SETTING))


def save_reference_figures(module: str, figures: dict[str, float | str], profile: str,
                           device: torch.device | str | None = None) -> Path:
    """Write this machine's figures for `module` as a reference file (maintainers, on a GPU: notebooks/reference/)."""
    device = torch.device(device) if device is not None else default_device()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else describe_device(device)
    import torchvision

    record = {"device": name, "torch": torch.__version__, "torchvision": torchvision.__version__,
              "date": datetime.date.today().isoformat(), "profile": profile, "figures": figures}
    REFERENCE_DIR.mkdir(parents=True, exist_ok=True)
    path = REFERENCE_DIR / f"{module}_{_slug(name)}.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path
