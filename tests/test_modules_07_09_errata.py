"""Issue 26: what modules 04b, 07, 08 and 09 teach must stay true. Each test fails on the text or behaviour it
corrected (the errata of the review of 2026-11-25)."""

from __future__ import annotations

import json
import re

import pytest
import torch
import torch.distributed as dist

from loaderlab import distributed
from loaderlab.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def notebook_text(stem: str) -> str:
    """Every cell's source of notebooks/<stem>.ipynb, one cell after another."""
    cells = json.loads((REPO_ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells)


def flat(text: str) -> str:
    """Whitespace runs made single spaces, so a sentence matches across the lines it wraps over."""
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize(("backend", "device_type"), [("gloo", "cpu"), ("cpu:gloo,cuda:nccl", "cpu"),
                                                      ("nccl", "cuda"), ("undefined", "cpu")])
def test_collective_device_follows_the_backend(monkeypatch, backend: str, device_type: str) -> None:
    """Erratum 3: NCCL has no CPU collectives, so its tensors go on the rank's GPU; a CPU backend takes CPU tensors."""
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    device = distributed.collective_device()
    assert device.type == device_type
    if device_type == "cuda":
        assert device.index == 3


def test_exact_mean_reduces_on_the_groups_device(monkeypatch) -> None:
    """Erratum 3: the reference exact_mean all-reduced a CPU tensor whatever the backend (fails under NCCL)."""
    from solutions import ex12_distributed_epochs as solution

    asked = []
    monkeypatch.setattr(solution, "collective_device", lambda group=None: asked.append(group) or torch.device("cpu"))
    monkeypatch.setattr(dist, "all_reduce", lambda tensor, *args, **kwargs: None)
    assert solution.exact_mean([1.0, 2.0, 3.0]) == 2.0
    assert asked, "exact_mean does not ask where the group's backend reduces"


def test_no_sentence_promises_nccl_unconditionally() -> None:
    """Erratum 3: 'the same code runs on a cluster with NCCL' was false for a CPU all_reduce."""
    sources = [README, (REPO_ROOT / "loaderlab" / "distributed.py").read_text()]
    for text in sources:
        assert not re.search(r"runs (unchanged )?(under `torchrun` )?on a cluster with NCCL", flat(text))
    assert "NCCL has no CPU collectives" in flat(README)
