"""Notebook 11's hooks modules (loaderlab.lessons.m11_elastic and m11_own_steps: exercise 16's API in short) in one
process, and the notebook's shape: its jobs few and small, each skipped where no sandbox can be made."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch

from loaderlab.lessons import m11_elastic, m11_own_steps
from loaderlab.paths import REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "11_elastic_training.ipynb"
JOB_SAMPLES_AT_MOST = 120   # the brief of every job: a 2-node job takes 15-25 s on the 2-core machine
JOBS_AT_MOST = 4            # the notebook's budget, 120 s on 2 cores, is mostly its jobs


def plan(module=m11_elastic, num_samples: int = 96, batch_size: int = 4, epoch: int = 0):
    return module.EpochPlan(num_samples, batch_size, seed=0, epoch=epoch, dataset="elastic-demo")


def read_in_step_order(steps_by_rank: list[list[list[int]]]) -> list[int]:
    return [sample for step in zip(*steps_by_rank) for part in step for sample in part]


def samples_after_a_resume(module, world_before: int, steps_before: int, world_after: int) -> Counter:
    """Every sample a job trains: `steps_before` steps on `world_before` ranks, then the rest on `world_after`."""
    epoch = plan(module)
    before = [s for rank in range(world_before) for step in epoch.steps(world_before, rank, 0)[:steps_before]
              for s in step]
    state = epoch.position_from(epoch.state_dict(epoch.position_after(0, steps_before, world_before)))
    after = [s for rank in range(world_after) for step in epoch.steps(world_after, rank, state) for s in step]
    return Counter(before + after)


def test_the_order_is_a_permutation_drawn_from_seed_and_epoch() -> None:
    assert sorted(plan().order()) == list(range(96))
    assert plan().order() == plan().order() != plan(epoch=1).order()


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("start", [0, 8, 37, 95, 96])
def test_steps_split_the_rest_of_the_order_by_the_rule(world_size: int, start: int) -> None:
    epoch = plan()
    steps = [epoch.steps(world_size, rank, start) for rank in range(world_size)]
    assert {len(s) for s in steps} == {math.ceil((96 - start) / (world_size * 4))}
    assert read_in_step_order(steps) == epoch.order()[start:]
    for step in zip(*steps):
        sizes = [len(part) for part in step]
        assert sizes == [len(part) for part in np.array_split(np.arange(sum(sizes)), world_size)]


def test_position_after_some_steps_is_where_the_rest_begins() -> None:
    epoch = plan()
    for world_size in (1, 2, 3):
        position = epoch.position_after(8, 3, world_size)
        done = [s for rank in range(world_size) for step in epoch.steps(world_size, rank, 8)[:3] for s in step]
        assert sorted(done) == sorted(epoch.order()[8:position])
    assert epoch.position_after(90, 5, 2) == 96


def test_a_state_resumes_with_another_batch_size_and_refuses_another_epoch() -> None:
    state = json.loads(json.dumps(plan().state_dict(40)))
    assert plan(batch_size=8).position_from(state) == 40
    with pytest.raises(ValueError, match="not of this epoch"):
        plan(epoch=1).position_from(state)


def test_the_global_position_trains_every_sample_once_whatever_the_world_did() -> None:
    for before, after in ((2, 1), (1, 2), (2, 3), (2, 2)):
        assert samples_after_a_resume(m11_elastic, before, 5, after) == Counter(range(96))


def test_counting_own_steps_repeats_on_fewer_ranks_loses_on_more_and_is_exact_on_as_many() -> None:
    fewer = samples_after_a_resume(m11_own_steps, 2, 5, 1)
    assert set(fewer) == set(range(96)) and sum(c - 1 for c in fewer.values()) == 20
    more = samples_after_a_resume(m11_own_steps, 1, 5, 2)
    assert set(more.values()) == {1} and len(more) == 96 - 20
    assert samples_after_a_resume(m11_own_steps, 2, 5, 2) == Counter(range(96))


def test_world_is_read_from_torchruns_environment_when_asked(monkeypatch) -> None:
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_RANK", "0")
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
        assert m11_elastic.world_from_environment() == m11_elastic.World(rank, 2, 0, 1)


def test_join_makes_a_gloo_group_from_torchruns_address_with_its_own_timeout(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(m11_elastic.dist, "init_process_group", lambda *args, **kwargs: calls.append((args, kwargs)))
    m11_elastic.join(m11_elastic.World(1, 2, 0, 0))
    assert calls == [(("gloo",), {"init_method": "env://", "rank": 1, "world_size": 2,
                                  "timeout": timedelta(seconds=m11_elastic.STEP_TIMEOUT_S)})]


def test_a_checkpoint_comes_back_as_saved_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pt"
    assert m11_elastic.load_checkpoint(path) is None
    m11_elastic.save_checkpoint(path, {"step": 5, "weights": torch.arange(3.0), "loader": plan().state_dict(40)})
    m11_elastic.save_checkpoint(path, {"step": 10, "weights": torch.arange(4.0), "loader": plan().state_dict(80)})
    loaded = m11_elastic.load_checkpoint(path)
    assert loaded["step"] == 10 and torch.equal(loaded["weights"], torch.arange(4.0))
    assert plan().position_from(loaded["loader"]) == 80
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


# ---- notebook 11 --------------------------------------------------------------------------------------------------

def cells(kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == kind]


def test_notebook_11_says_its_time_and_ends_with_exercise_16() -> None:
    markdown = cells("markdown")
    assert re.search(r"takes about .* on 2 cores", markdown[0]), "say at the top how long the notebook takes on 2 cores"
    text = "\n".join(markdown)
    for section in ("## 1.", "## 2.", "## 3.", "## 4.", "## 5.", "## 6.", "## 7. Exercise 16", "## What you measured"):
        assert section in text, f"notebook 11 lacks its section {section}"
    assert all(name in markdown[-1] for name in ("ex16_elastic_epochs", "pytest grader/test_ex16_elastic_epochs.py",
                                                 "make hint EX=ex16"))


def test_notebook_11_runs_few_small_jobs_on_its_own_hooks_and_skips_them_without_a_sandbox() -> None:
    code = cells("code")
    source = "\n".join(code)
    assert "NO_SANDBOX = sandbox_unavailable()" in code[0]
    assert not re.search(r"^\s*(from|import) (exercises|solutions)\b", source, re.M), "the hand-out's stub is unfinished"
    assert source.count("run_job(") <= JOBS_AT_MOST, "every job costs 15-25 s on 2 cores"
    assert all(int(n) <= JOB_SAMPLES_AT_MOST for n in re.findall(r"num_samples=(\d+)", source))
    for cell in code:
        if re.search(r"\b(run_job\(|killed\b|straggled\b|node_lost\[)", cell):
            assert "if NO_SANDBOX:" in cell, f"a job's cell runs without the sandbox check:\n{cell[:300]}"
    assert "shutil.rmtree(work)" in code[-1]
