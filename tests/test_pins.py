"""requirements.txt and environment.yml pin the same versions, and the essentials are pinned."""

from __future__ import annotations

import re

import yaml

from loaderlab.paths import REPO_ROOT

ESSENTIAL = {"torch", "torchvision", "tensorflow-cpu", "jupyterlab", "nbval", "pytest", "pillow", "numpy", "matplotlib", "tqdm"}


def normalise(name: str) -> str:
    """PEP 503 name: case and the -_. separators do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"requirements.txt: {line!r} is not pinned with =="
            pins[normalise(name)] = version
    return pins


def environment() -> dict:
    return yaml.safe_load((REPO_ROOT / "environment.yml").read_text())


def test_every_essential_package_is_pinned() -> None:
    assert ESSENTIAL <= set(requirement_pins()), f"missing pins: {ESSENTIAL - set(requirement_pins())}"


def test_environment_yml_agrees_with_requirements() -> None:
    pins = requirement_pins()
    pip_section = next(d["pip"] for d in environment()["dependencies"] if isinstance(d, dict))
    listed = [entry for entry in pip_section if "==" in entry]
    assert {normalise(e.split("==")[0]) for e in listed} >= ESSENTIAL
    for entry in listed:
        name, version = entry.split("==")
        assert pins.get(normalise(name)) == version, f"environment.yml pins {entry}, requirements.txt has {pins.get(normalise(name))}"


def test_python_versions_agree() -> None:
    conda_python = next(d for d in environment()["dependencies"] if isinstance(d, str) and d.startswith("python="))
    header = (REPO_ROOT / "requirements.txt").read_text().splitlines()[0]
    assert re.search(rf"Python {re.escape(conda_python.split('=')[1])}\b", header), (conda_python, header)


def test_torchvision_is_the_release_built_for_torch() -> None:
    import torch
    import torchvision
    from torchvision.io import decode_jpeg, encode_jpeg
    from torchvision.ops import nms

    pins = requirement_pins()
    assert torch.__version__.split("+")[0] == pins["torch"] and torchvision.__version__.split("+")[0] == pins["torchvision"]
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0]])
    assert nms(boxes, torch.tensor([1.0, 0.9]), 0.5).tolist() == [0]
    image = torch.randint(0, 256, (3, 32, 48), dtype=torch.uint8)
    assert decode_jpeg(encode_jpeg(image)).shape == (3, 32, 48)
