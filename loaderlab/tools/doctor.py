"""`python -m loaderlab.tools.doctor`: what this machine offers the course, and what will hurt.

Prints versions, how the packages were installed (installer, time) and the venv's
size on disk, usable cores, memory, /dev/shm, the multiprocessing start method,
the GPU if any, free disk and the dataset's status, then warnings.
"""

from __future__ import annotations

from importlib import metadata
import multiprocessing
import os
import platform
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from loaderlab.tools.install import read_record
from loaderlab.machine import shm_bytes, total_ram_bytes, usable_cores
from loaderlab.paths import REPO_ROOT, DatasetMissing, active_profile, dataset_dir
from loaderlab.storage.server import StorageServerError, read_state, state_server_answers, weed_binary

# The lock installs tensorflow-cpu where it has wheels (Linux x86-64, Windows), tensorflow elsewhere.
TENSORFLOW = "tensorflow-cpu" if sys.platform in ("linux", "win32") and platform.machine().lower() in ("x86_64", "amd64") else "tensorflow"
PACKAGES = ("numpy", "pillow", "torch", "torchvision", TENSORFLOW, "matplotlib", "tqdm", "psutil")
SMALL_SHM_BYTES = 1 << 30
LOW_DISK_BYTES = 5 << 30


@dataclass
class Report:
    """The doctor's findings: (label, value) facts and warnings."""

    facts: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        width = max(len(label) for label, _ in self.facts)
        lines = [f"{label:<{width}}  {value}" for label, value in self.facts]
        lines += [""] + ([f"WARNING: {w}" for w in self.warnings] or ["No warnings: this machine is ready for the course."])
        return "\n".join(lines)


def _version(distribution: str) -> str:
    """The installed version, read from package metadata (no slow, chatty imports)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed (run `make lab` or `pip install -r requirements.txt`)"


def _gpu() -> str:
    try:
        import torch
    except Exception:
        return "unknown (torch not importable)"
    if torch.cuda.is_available():
        return ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "Apple MPS"
    return "none (the course emulates the accelerator step)"


def disk_usage(folder: Path) -> int:
    """Bytes that `folder` takes on disk (allocated blocks where the OS reports them, else file sizes)."""
    total = 0
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            total += disk_usage(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            stat = entry.stat(follow_symlinks=False)
            total += getattr(stat, "st_blocks", 0) * 512 or stat.st_size
    return total


def install_facts(venv: Path) -> list[tuple[str, str]]:
    """How the venv `venv` was installed (as `make`'s install rule recorded it) and its size on disk."""
    record = read_record(venv / ".installed")
    how = (f"{record['installer']} in {record['seconds']} s on {record.get('when', '?')}"
           + (f", offline from {record['wheels']}" if record.get("wheels") else "")
           if "seconds" in record else "not recorded (installed before the install rule recorded its time)")
    return [("install", how), ("venv size", f"{disk_usage(venv) / 2**30:.1f} GiB at {venv}")]


def storage_fact() -> tuple[str, str | None]:
    """Module 10's S3 server: where its binary is and whether `make storage` runs one; a warning where it is missing."""
    try:
        binary = weed_binary()
    except StorageServerError as err:
        return "missing", str(err)
    state = read_state()
    running = (f"; `make storage`'s runs at {state['endpoint']['url']}" if state_server_answers(state)
               else "; none running (`make storage` starts one, the tests and notebook 10 their own)")
    return f"SeaweedFS at {binary}{running}", None


def diagnose(import_packages: bool = True) -> Report:
    """Collect the facts and warnings (set import_packages=False to skip the slow imports)."""
    report = Report()
    cores = usable_cores()
    start_method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    shm = shm_bytes()
    ram = total_ram_bytes()
    disk = shutil.disk_usage(REPO_ROOT).free
    report.facts += [
        ("python", sys.version.split()[0]),
        *([(name, _version(name)) for name in PACKAGES] if import_packages else []),
        *(install_facts(Path(sys.prefix)) if sys.prefix != sys.base_prefix
          else [("install", "not in a virtual environment (the course's is .venv, made by `make lab`)")]),
        ("usable cores", f"{cores} (os.cpu_count() says {multiprocessing.cpu_count()})"),
        ("memory", f"{ram / 2**30:.1f} GiB" if ram else "unknown"),
        ("/dev/shm", f"{shm / 2**30:.2f} GiB" if shm is not None else "none on this OS"),
        ("start method", start_method),
        ("GPU", _gpu() if import_packages else "not checked"),
        ("free disk", f"{disk / 2**30:.1f} GiB at {REPO_ROOT}"),
    ]
    profile = active_profile()
    try:
        report.facts.append((f"dataset ({profile})", str(dataset_dir(profile))))
    except DatasetMissing as err:
        report.facts.append((f"dataset ({profile})", "missing"))
        report.warnings.append(str(err))
    storage, missing = storage_fact()
    report.facts.append(("S3 server (module 10)", storage))
    if missing:
        report.warnings.append(missing)
    if cores == 1:
        report.warnings.append("only 1 usable core: process-based lessons cannot speed up here; their graders skip the core-scaled targets.")
    if shm is not None and shm < SMALL_SHM_BYTES:
        report.warnings.append(
            f"/dev/shm is {shm / 2**20:.0f} MiB: DataLoader workers and shared memory may die with 'bus error'. "
            "In Docker, run with --shm-size=2g (or --ipc=host).")
    if start_method != "fork":
        report.warnings.append(
            f"multiprocessing starts workers with '{start_method}': each worker re-imports your module, so "
            "datasets and functions must live in .py files (not notebook cells), and start-up is slower.")
    if disk < LOW_DISK_BYTES:
        report.warnings.append(f"only {disk / 2**30:.1f} GiB free: the workshop dataset needs about 1.2 GiB, shards as much again.")
    return report


if __name__ == "__main__":
    print(diagnose())
