"""Feeding an accelerator: which device there is, the one JPEG-decoder adapter, and measuring copies and overlap.

- Devices: `default_device`, `synchronize` (whatever the accelerator), `cuda_missing_reason`, `describe_device`.
- Decoding: `decode_jpegs(data, device)` decodes a list of JPEGs in one call, on the device where the
  installed packages allow it (nvJPEG through torchvision on CUDA: one batch only on GPUs with the hardware JPEG
  engine, one image after another elsewhere, `nvjpeg_path` says which), and `jpeg_decoder(device)` says which
  decoder that is. Module 07's exercises decode only through it, so a torchvision release that drops its
  decoders changes this file alone.
- Measuring (module 07's notebook and graders): host memory copies, host-to-device copies, the bus's nominal
  limit, CUDA-event timing and `compare_on_cuda`, a copy/compute timeline on two CUDA streams, and an
  emulation of that timeline with sleeps for machines without a GPU.
- Augmentation on the device: the same random crop and flip, per sample or for a whole batch at once.
- Reference figures measured on a GPU: `reference_figures`, `save_reference_figures` (notebooks/reference/).

Only torch, torchvision, numpy and Pillow are imported here.
"""

from __future__ import annotations

import datetime
import io
import json
import platform
import re
import shutil
import statistics
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from loaderlab.bench import Comparison
from loaderlab.images import DECODE_ERRORS, CorruptImage
from loaderlab.machine import usable_cores
from loaderlab.paths import REPO_ROOT
from loaderlab.trace import Span, Tracer, span

REFERENCE_DIR = REPO_ROOT / "notebooks" / "reference"
# torchvision 0.29 marks its image decoders deprecated (TorchCodec supersedes them); they still work there.
TORCHVISION_DEPRECATION = "image decoding and encoding capabilities of TorchVision are deprecated"
# Per-lane, per-direction bandwidth of a PCIe link by generation, in GB/s after line encoding
# (8b/10b up to gen 2, 128b/130b for gens 3 to 5, FLIT mode for gen 6).
PCIE_LANE_GB_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
Bytes = bytes | bytearray | memoryview


# ---- devices ---------------------------------------------------------------------------------

def default_device() -> torch.device:
    """The accelerator if there is one (CUDA, then Apple's MPS), else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until `device` (an accelerator: CUDA, MPS, ...) has finished the work queued so far; nothing on the CPU.

    Timing accelerator work without it times the launches, not the work."""
    device = torch.device(device) if device is not None else default_device()
    if device.type == "cpu":
        return
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "synchronize"):
        accelerator.synchronize(device)
    else:  # a torch older than torch.accelerator
        getattr(torch, device.type).synchronize()


def cuda_missing_reason() -> str | None:
    """None where a CUDA GPU is usable; else one line saying why a CUDA-only check or cell is skipped."""
    if torch.cuda.is_available():
        return None
    built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "built without CUDA"
    return (f"needs a CUDA GPU and there is none here (torch {torch.__version__}, {built}, sees no GPU); "
            "it runs on a machine with an NVIDIA GPU")


def describe_device(device: torch.device | str | None = None) -> str:
    """The device in words: the GPU's name and memory, or the CPU's cores."""
    device = torch.device(device) if device is not None else default_device()
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        return (f"{properties.name} ({device}, {properties.total_memory / 2**30:.0f} GiB, "
                f"CUDA {torch.version.cuda})")
    if device.type == "mps":
        return f"Apple GPU (mps) on {platform.machine()}"
    return f"CPU only ({usable_cores()} usable cores, {platform.processor() or platform.machine()})"


# ---- the JPEG decoder adapter -----------------------------------------------------------------

def _tiny_jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 80, 40)).save(buffer, format="JPEG")
    return buffer.getvalue()


def _as_tensor(data: Bytes | torch.Tensor) -> torch.Tensor:
    """Encoded bytes as the 1-D uint8 CPU tensor torchvision's decoders take (a copy: bytes are read-only)."""
    if isinstance(data, torch.Tensor):
        return data
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if len(data) else torch.empty(0, dtype=torch.uint8)


def _torchvision_decode(tensors: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    from torchvision.io import ImageReadMode, decode_jpeg

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*" + TORCHVISION_DEPRECATION, category=DeprecationWarning)
        return decode_jpeg(tensors, mode=ImageReadMode.RGB, device=device)


def _pillow_decode(data: Bytes | torch.Tensor) -> torch.Tensor:
    raw = data.numpy().tobytes() if isinstance(data, torch.Tensor) else bytes(data)
    with Image.open(io.BytesIO(raw)) as image:
        return torch.from_numpy(np.asarray(image.convert("RGB")).transpose(2, 0, 1).copy())


@cache
def _torchvision_decodes_on(device_type: str) -> bool:
    """Whether this torchvision decodes JPEGs on `device_type` ('cpu' or 'cuda'): tried once on a tiny image."""
    try:
        where = torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")
        _torchvision_decode([_as_tensor(_tiny_jpeg())], where)
    except Exception:  # no image extension, no nvJPEG in this build, or decoders removed: use another route
        return False
    return True


# nvjpeg.h: nvjpegBackend_t NVJPEG_BACKEND_HARDWARE = 3; nvjpegStatus_t SUCCESS = 0, ARCH_MISMATCH = 7.
NVJPEG_BACKEND_HARDWARE, NVJPEG_STATUS_SUCCESS, NVJPEG_STATUS_ARCH_MISMATCH = 3, 0, 7
HARDWARE, SOFTWARE = "hardware", "software"


def _loaded_nvjpeg() -> str | None:
    """The path of the libnvjpeg this process has loaded (torchvision's image extension links it), or a soname."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libnvjpeg" in line and "/" in line:
                return line[line.index("/"):].strip()
    except OSError:  # not Linux: fall back to the loader's search
        pass
    import ctypes.util

    return ctypes.util.find_library("nvjpeg")


@cache
def nvjpeg_path(device_index: int | None = None) -> tuple[str | None, str]:
    """Which path torchvision's CUDA JPEG decoder takes on this GPU: (HARDWARE, why), (SOFTWARE, why) or (None, why).

    torchvision (`decode_jpegs_cuda.cpp`, `CUDAJpegDecoder`) asks nvJPEG for its hardware backend and, on
    NVJPEG_STATUS_ARCH_MISMATCH (a GPU without the hardware JPEG engine: V100, T4 and most consumer cards), falls back
    to the default backend, which decodes one image at a time: Huffman decoding on the host, in the calling thread,
    and a stream synchronisation per image. Only with the hardware engine (A100/H100 class) is a list of baseline
    JPEGs decoded as one batch. This asks nvJPEG the same question torchvision asks, through the library torchvision
    loaded; None where that cannot be asked (no CUDA, no nvJPEG found)."""
    import ctypes

    if not torch.cuda.is_available():
        return None, "no CUDA GPU"
    if not _torchvision_decodes_on("cuda"):  # also loads torchvision's image extension, and with it libnvjpeg
        return None, "this torchvision does not decode JPEGs on CUDA"
    library = _loaded_nvjpeg()
    if library is None:
        return None, "libnvjpeg was not found in this process, so its backends could not be asked"
    try:
        nvjpeg = ctypes.CDLL(library)
    except OSError as err:
        return None, f"libnvjpeg could not be opened ({err})"
    handle = ctypes.c_void_p()
    with torch.cuda.device(device_index if device_index is not None else torch.cuda.current_device()):
        status = nvjpeg.nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, None, None, 0, ctypes.byref(handle))
        if status == NVJPEG_STATUS_SUCCESS:
            nvjpeg.nvjpegDestroy(handle)
    if status == NVJPEG_STATUS_SUCCESS:
        return HARDWARE, "this GPU has nvJPEG's hardware backend: baseline JPEGs are decoded as one batch"
    if status == NVJPEG_STATUS_ARCH_MISMATCH:
        return SOFTWARE, ("no hardware JPEG engine on this GPU (nvJPEG: ARCH_MISMATCH): torchvision decodes one image "
                          "at a time, Huffman decoding on the host and a stream synchronisation per image")
    return None, f"nvjpegCreateEx(hardware) returned status {status}, neither success nor ARCH_MISMATCH"


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return "?"


def _at_least(package: str, major: int, minor: int) -> bool:
    found = re.match(r"(\d+)\.(\d+)", _version(package))
    return found is not None and (int(found[1]), int(found[2])) >= (major, minor)


def jpeg_decoder(device: torch.device | str | None = None) -> str:
    """Which decoder `decode_jpegs` uses for `device`, in words."""
    device = torch.device(device) if device is not None else default_device()
    torchvision = f"torchvision {_version('torchvision')} decode_jpeg"
    note = " (deprecated in torchvision 0.29 in favour of TorchCodec; it still works here)" \
        if _at_least("torchvision", 0, 29) else ""
    if device.type == "cuda" and _torchvision_decodes_on("cuda"):
        path, why = nvjpeg_path(device.index)
        how = {HARDWARE: "the hardware decoder, the whole batch in one call",
               SOFTWARE: "no hardware decoder: one image at a time, Huffman decoding on the host"}.get(
                   path, f"path not known: {why}")
        return f"{torchvision} on {device} (nvJPEG; {how}){note}"
    if _torchvision_decodes_on("cpu"):
        where = "the CPU" if device.type == "cpu" else f"the CPU, then copied to {device}"
        return f"{torchvision} on {where} (libjpeg-turbo), one image after another{note}"
    where = "the CPU" if device.type == "cpu" else f"the CPU, then copied to {device}"
    return f"Pillow {_version('pillow')} on {where}, one image after another (torchvision's decoder is unavailable)"


def _name(names: Sequence[str] | None, position: int) -> str:
    return names[position] if names is not None else f"image {position} of the batch"


def _find_broken(data: Sequence[Bytes | torch.Tensor], names: Sequence[str] | None, error: BaseException) -> None:
    """Raise CorruptImage for the first sample that does not decode on its own (Pillow), if there is one."""
    for position, item in enumerate(data):
        if len(item) == 0:
            raise CorruptImage(_name(names, position), "empty file (0 bytes)") from error
        try:
            _pillow_decode(item)
        except UnidentifiedImageError as err:
            raise CorruptImage(_name(names, position), "not a JPEG (no image format recognised)") from err
        except DECODE_ERRORS as err:
            raise CorruptImage(_name(names, position), f"not a decodable JPEG ({type(err).__name__}: {err})") from err


def decode_jpegs(data: Sequence[Bytes | torch.Tensor], device: torch.device | str | None = None,
                 names: Sequence[str] | None = None) -> list[torch.Tensor]:
    """Decode JPEGs (bytes, or 1-D uint8 CPU tensors) to RGB uint8 (3, H, W) tensors on `device`, in one call.

    On CUDA the whole list goes to nvJPEG at once (`torchvision.io.decode_jpeg(list, device=...)`), which decodes it
    as one batch only on a GPU with the hardware JPEG engine and one image after another elsewhere (`nvjpeg_path`;
    the call returns when the list is decoded either way); on the
    CPU, torchvision's decoder, else Pillow; on other devices (MPS), the CPU decodes and the images are
    copied. `jpeg_decoder(device)` says which. A sample that does not decode raises
    `loaderlab.images.CorruptImage` naming it (`names[i]` where given, else its position).
    """
    device = torch.device(device) if device is not None else default_device()
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if len(data) == 0:
        return []
    if names is not None and len(names) != len(data):
        raise ValueError(f"{len(names)} names for {len(data)} images")
    where = torch.device("cuda" if device.type == "cuda" and _torchvision_decodes_on("cuda") else "cpu")
    try:
        if _torchvision_decodes_on("cpu") or where.type == "cuda":
            images = _torchvision_decode([_as_tensor(item) for item in data], device if where.type == "cuda" else where)
        else:
            images = [_pillow_decode(item) for item in data]
    except Exception as err:  # the decoders say little about which image: find it
        _find_broken(data, names, err)
        if where.type != "cuda":
            raise
        warnings.warn(f"nvJPEG could not decode this batch ({err}); it was decoded on the CPU instead", stacklevel=2)
        return [image.to(device) for image in decode_jpegs(data, "cpu", names)]
    return images if where.type == device.type else [image.to(device) for image in images]


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


# ---- timing on CUDA ------------------------------------------------------------------------------

def cuda_seconds(run: Callable[[], Any], device: torch.device | str | None = None) -> tuple[float, Any]:
    """Seconds `run()` takes, timed with CUDA events on the current stream (synchronised before and after),
    and what it returned."""
    device = torch.device(device) if device is not None else torch.device("cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record()
    result = run()
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) / 1000, result


def cuda_sleep_cycles(seconds: float, device: torch.device | str | None = None) -> int:
    """How many cycles `torch.cuda._sleep` needs to keep the GPU busy for about `seconds` (measured here)."""
    probe = 20_000_000
    torch.cuda._sleep(probe)  # warm-up
    elapsed, _ = cuda_seconds(lambda: torch.cuda._sleep(probe), device)
    return max(1, int(probe * seconds / elapsed))


def matmul_step(seconds: float, device: torch.device | str | None = None, size: int = 2048) -> Callable[[], None]:
    """A step that fills the GPU for about `seconds`: repeated products of two `size` x `size` float32 matrices.

    Unlike `torch.cuda._sleep` (one thread on one SM, the rest of the GPU idle), every SM is busy, as under a real
    model's step: work on a side stream then competes with it, and only the copy engine overlaps for free."""
    device = torch.device(device) if device is not None else torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, generator=generator)
    b = torch.randn(size, size, device=device, generator=generator)
    out = torch.empty(size, size, device=device)
    torch.mm(a, b, out=out)  # warm-up: the library's handle and kernel choice
    one = sorted(cuda_seconds(lambda: torch.mm(a, b, out=out), device)[0] for _ in range(5))[2]
    repeats = max(1, round(seconds / one))

    def step() -> None:
        for _ in range(repeats):
            torch.mm(a, b, out=out)

    return step


def compare_on_cuda(baseline: Callable[[], int], candidate: Callable[[], int], *, rounds: int = 5,
                    warmup_rounds: int = 1, name: str = "candidate", baseline_name: str = "baseline",
                    target: float | None = None, unit: str = "items",
                    device: torch.device | str | None = None) -> Comparison:
    """`loaderlab.bench.compare` for GPU work: each callable runs one pass and returns the items it handled;
    passes are timed with CUDA events, alternated (baseline, candidate, ...) after `warmup_rounds`, and
    summarised by the median ratio of items per second."""
    for _ in range(warmup_rounds):
        cuda_seconds(baseline, device)
        cuda_seconds(candidate, device)
    base_ips, cand_ips, ratios = [], [], []
    for _ in range(rounds):
        seconds, items = cuda_seconds(baseline, device)
        base_ips.append(items / seconds)
        seconds, items = cuda_seconds(candidate, device)
        cand_ips.append(items / seconds)
        ratios.append(cand_ips[-1] / base_ips[-1])
    return Comparison(name=name, baseline_name=baseline_name, baseline_ips=statistics.median(base_ips),
                      candidate_ips=statistics.median(cand_ips), ratio=statistics.median(ratios),
                      ratio_min=min(ratios), ratio_max=max(ratios), rounds=rounds, cores=usable_cores(),
                      unit=unit, target=target)


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
