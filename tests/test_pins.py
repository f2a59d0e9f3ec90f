"""requirements.txt is one lock for every platform, resolved from requirements.in; environment.yml installs it."""

from __future__ import annotations

import re

import pytest
import yaml
from packaging.markers import Marker

from loaderlab.tools.install import DIRECT, LOCK, PLATFORMS, Platform, read_lock, pins_for

ESSENTIAL = {"torch", "torchvision", "jupyterlab", "nbval", "pytest", "pillow", "numpy", "matplotlib", "tqdm"}
# TensorFlow's CPU build where it has wheels; elsewhere the tensorflow build (CPU-only on these platforms).
TENSORFLOW = {"Linux x86-64": "tensorflow-cpu", "Windows x86-64": "tensorflow-cpu",
              "macOS arm64": "tensorflow", "Linux aarch64": "tensorflow"}
BY_NAME = {p.name: p for p in PLATFORMS}


def current_pins() -> dict[str, str]:
    """The lock's pins for the machine running the tests."""
    return {p.name: p.version for p in read_lock() if p.marker is None or Marker(p.marker).evaluate()}


def environment() -> dict:
    return yaml.safe_load((LOCK.parent / "environment.yml").read_text())


def test_the_lock_covers_the_four_platforms() -> None:
    assert set(BY_NAME) == set(TENSORFLOW)


@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda p: p.name)
def test_every_essential_package_is_pinned_on_every_platform(platform: Platform) -> None:
    pins = pins_for(platform, read_lock())
    missing = ESSENTIAL - set(pins)
    assert not missing, f"{platform.name}: the lock pins no {sorted(missing)}"
    assert (pins["torch"], pins["torchvision"]) == ("2.14.1", "0.29.1"), f"{platform.name}: torch and torchvision are a pair"


@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda p: p.name)
def test_tensorflow_is_the_build_that_has_wheels_there(platform: Platform) -> None:
    pins = pins_for(platform, read_lock())
    wanted = TENSORFLOW[platform.name]
    other = {"tensorflow", "tensorflow-cpu"} - {wanted}
    assert pins.get(wanted) == "2.21.0" and not other & set(pins), (platform.name, pins.get("tensorflow"), pins.get("tensorflow-cpu"))


def test_cuda_libraries_are_installed_only_on_linux() -> None:
    """torch's own metadata asks for triton and the CUDA libraries on Linux only (`platform_system == "Linux"`)."""
    gpu_stack = [p for p in read_lock() if p.name == "triton" or p.name.startswith(("nvidia-", "cuda-"))]
    assert {"triton", "nvidia-cudnn-cu13", "cuda-toolkit"} <= {p.name for p in gpu_stack}
    for pin in gpu_stack:
        assert pin.marker and "sys_platform == 'linux'" in pin.marker, f"{pin.name} must carry a Linux-only marker"
    assert "triton" in pins_for(BY_NAME["Linux x86-64"], read_lock())
    for name in ("macOS arm64", "Windows x86-64"):
        assert not {p.name for p in gpu_stack} & set(pins_for(BY_NAME[name], read_lock())), name


def test_direct_dependencies_are_pinned_alike_in_the_lock() -> None:
    """Each line of requirements.in has its version in the lock on every platform where its marker applies."""
    direct = read_lock(DIRECT)
    assert {"torch", "torchvision", "tensorflow", "tensorflow-cpu"} <= {p.name for p in direct}
    for platform in PLATFORMS:
        locked = pins_for(platform, read_lock())
        for name, version in pins_for(platform, direct).items():
            assert locked.get(name) == version, f"{platform.name}: requirements.in pins {name}=={version}, the lock {locked.get(name)}"


def test_the_lock_keeps_the_torch_warning() -> None:
    header = LOCK.read_text().split("\n\n")[0]
    assert "+cpu" in header and "torchvision::nms" in header, "keep the header's warning about +cpu torch wheels"


def test_environment_yml_installs_the_lock() -> None:
    """conda's pip section installs the lock itself, so the two cannot disagree."""
    pip_section = next(d["pip"] for d in environment()["dependencies"] if isinstance(d, dict))
    assert pip_section == ["-r requirements.txt", "-e ."], pip_section


def test_python_versions_agree() -> None:
    conda_python = next(d for d in environment()["dependencies"] if isinstance(d, str) and d.startswith("python="))
    header = LOCK.read_text().splitlines()[0]
    assert re.search(rf"Python {re.escape(conda_python.split('=')[1])}\b", header), (conda_python, header)


def test_torchvision_is_the_release_built_for_torch() -> None:
    import torch
    import torchvision
    from torchvision.io import decode_jpeg, encode_jpeg
    from torchvision.ops import nms

    pins = current_pins()
    assert torch.__version__.split("+")[0] == pins["torch"] and torchvision.__version__.split("+")[0] == pins["torchvision"]
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0]])
    assert nms(boxes, torch.tensor([1.0, 0.9]), 0.5).tolist() == [0]
    image = torch.randint(0, 256, (3, 32, 48), dtype=torch.uint8)
    assert decode_jpeg(encode_jpeg(image)).shape == (3, 32, 48)
