"""Feeding an accelerator: which device there is, the one JPEG-decoder adapter, and timing on CUDA.

- Devices: `default_device`, `synchronize` (whatever the accelerator), `cuda_missing_reason`, `describe_device`.
- Decoding: `decode_jpegs(data, device)` decodes a list of JPEGs in one call, on the device where the
  installed packages allow it (nvJPEG through torchvision on CUDA: one batch only on GPUs with the hardware JPEG
  engine, one image after another elsewhere, `nvjpeg_path` says which), and `jpeg_decoder(device)` says which
  decoder that is. Module 07's exercises decode only through it, so a torchvision release that drops its
  decoders changes this file alone.
- Timing on CUDA (module 07's graders): CUDA-event timing, a sleep kernel of a chosen length, `compare_on_cuda`.

Notebook 07's own measurements (copies, the bus, timelines, augmentation on the device, reference figures) are in
`loaderlab.lessons.m07_device`. Only torch, torchvision, numpy and Pillow are imported here.
"""

from __future__ import annotations

import io
import platform
import re
import statistics
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from loaderlab.bench import Comparison
from loaderlab.images import DECODE_ERRORS, CorruptImage, file_kind
from loaderlab.machine import usable_cores

# torchvision 0.29 marks its image decoders deprecated (TorchCodec supersedes them); they still work there.
TORCHVISION_DEPRECATION = "image decoding and encoding capabilities of TorchVision are deprecated"
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


def _raw(data: Bytes | torch.Tensor) -> bytes:
    return data.numpy().tobytes() if isinstance(data, torch.Tensor) else bytes(data)


def _pillow_decode(data: Bytes | torch.Tensor) -> torch.Tensor:
    with Image.open(io.BytesIO(_raw(data))) as image:
        return torch.from_numpy(np.asarray(image.convert("RGB")).transpose(2, 0, 1).copy())


def _decode_by_content(data: Bytes | torch.Tensor) -> torch.Tensor:
    """Any image file (a PNG under a .jpg name, a CMYK JPEG) to RGB uint8 (3, H, W) on the CPU, its format read from
    its bytes: torchvision's decode_image (the same pixels as the reference's Pillow on every kind of file the dataset
    holds), else Pillow."""
    if not _torchvision_decodes_on("cpu"):
        return _pillow_decode(data)
    from torchvision.io import ImageReadMode, decode_image

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*" + TORCHVISION_DEPRECATION, category=DeprecationWarning)
        return decode_image(_as_tensor(data), mode=ImageReadMode.RGB)


# Kinds of file (loaderlab.images.file_kind) that the JPEG decoders do not take in their one call: a PNG or anything
# else that is not a JPEG (torchvision's decode_jpeg and nvJPEG refuse it) everywhere, and on CUDA a JPEG of four
# components too: torchvision asks nvJPEG for RGB and never allows CMYK (the pinned torchvision 0.29.1's image
# extension imports no nvjpegDecodeParamsSetAllowCMYK); what nvJPEG then does with an Adobe CMYK or YCCK file is
# owed to a GPU run (docs/gpu-measurements-owed.md), so they decode on the CPU, as the reference does.
NOT_A_JPEG_KINDS = ("png-named-jpg", "not an image")
FOUR_COMPONENT_KINDS = ("adobe-cmyk", "adobe-ycck")


def _in_the_batch(data: Bytes | torch.Tensor, on_cuda: bool) -> bool:
    """Whether the JPEG decoder's one call takes this file; the others decode on the CPU by their content."""
    kind = file_kind(_raw(data))
    return kind not in NOT_A_JPEG_KINDS and not (on_cuda and kind in FOUR_COMPONENT_KINDS)


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
            raise CorruptImage(_name(names, position), "not an image (no image format recognised)") from err
        except DECODE_ERRORS as err:
            raise CorruptImage(_name(names, position), f"not a decodable image ({type(err).__name__}: {err})") from err


def decode_jpegs(data: Sequence[Bytes | torch.Tensor], device: torch.device | str | None = None,
                 names: Sequence[str] | None = None) -> list[torch.Tensor]:
    """Decode image files (bytes, or 1-D uint8 CPU tensors) to RGB uint8 (3, H, W) tensors on `device`, in one call.

    On CUDA the list's JPEGs go to nvJPEG at once (`torchvision.io.decode_jpeg(list, device=...)`): on a GPU with the
    hardware JPEG engine its baseline files are decoded as one batch and the others (progressive) one after another
    by nvJPEG's hybrid decoder, which is how every file is decoded on a GPU without that engine (`nvjpeg_path`;
    torchvision sorts them, `nvjpegDecodeBatchedSupported`); the call returns when the list is decoded either way.
    On the CPU, torchvision's decoder, else Pillow; on other devices (MPS), the CPU decodes and the images are
    copied. `jpeg_decoder(device)` says which. Files the JPEG decoder does not take (`_in_the_batch`: a PNG under a
    .jpg name; on CUDA, CMYK and YCCK JPEGs) are decoded on the CPU by their content, as the reference does, and
    copied. Every kind comes out as the reference's pixels (`loaderlab.images`): as stored (no EXIF orientation:
    nvJPEG has none to apply), grayscale as three equal channels. A sample that does not decode raises
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
    batch = [n for n, item in enumerate(data) if _in_the_batch(item, where.type == "cuda")]
    images: list[torch.Tensor] = [torch.empty(0)] * len(data)
    try:
        if batch and (_torchvision_decodes_on("cpu") or where.type == "cuda"):
            decoded = _torchvision_decode([_as_tensor(data[n]) for n in batch], device if where.type == "cuda" else where)
        else:
            decoded = [_pillow_decode(data[n]) for n in batch]
        for n, image in zip(batch, decoded):
            images[n] = image
        for n in sorted(set(range(len(data))) - set(batch)):
            images[n] = _decode_by_content(data[n]).to(device if where.type == "cuda" else where)
    except Exception as err:  # the decoders say little about which image: find it
        _find_broken(data, names, err)
        if where.type != "cuda":
            raise
        warnings.warn(f"nvJPEG could not decode this batch ({err}); it was decoded on the CPU instead", stacklevel=2)
        return [image.to(device) for image in decode_jpegs(data, "cpu", names)]
    return images if where.type == device.type else [image.to(device) for image in images]


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


# ---- constants on the device -----------------------------------------------------------------------

def mean_std_on(device: torch.device | str, mean: Sequence[float] | np.ndarray,
                std: Sequence[float] | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """`mean` and `std` as float32 (1, C, 1, 1) tensors on `device`, made once per device and values, then reused.

    A tensor built from Python numbers on a GPU is a blocking host-to-device copy (torch's tensor_new.cpp copies with
    non_blocking=false): built for every batch, it waits for the device right after the batch's non-blocking copy,
    the hidden wait exercise 09 warns about. Do not modify the returned tensors in place: they are shared."""
    return _mean_std_on(torch.device(device), tuple(float(m) for m in mean), tuple(float(s) for s in std))


@cache
def _mean_std_on(device: torch.device, mean: tuple[float, ...],
                 std: tuple[float, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1).to(device),
            torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1).to(device))
