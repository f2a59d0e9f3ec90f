"""Module 08 (the capstone): the fixed parts in loaderlab.training, the frozen original the timed check compares
against, the shipped script's TODOs, and `python -m grader.capstone` (make capstone) with its saved run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from grader.checks import ex11_training_script as checks  # noqa: E402
from loaderlab import training  # noqa: E402
from loaderlab.paths import REPO_ROOT  # noqa: E402

STUB = REPO_ROOT / "exercises" / "ex11_training_script.py"
ORIGINAL = REPO_ROOT / "loaderlab" / "original_training_script.py"


def test_the_shipped_script_is_the_frozen_original() -> None:
    """The throughput target is a ratio against loaderlab.original_training_script: it must be the stub as shipped."""
    assert STUB.read_text() == ORIGINAL.read_text(), (
        "exercises/ex11_training_script.py and loaderlab/original_training_script.py differ: change both together "
        "(the timed check's baseline is the shipped script)")


def test_every_planted_defect_has_its_todo() -> None:
    tags = set(re.findall(r"TODO\((ex11[a-z])\)", STUB.read_text()))
    assert tags == {f"ex11{letter}" for letter in "abcdefghij"}


GIVEAWAYS = ("usable_cores", "persistent", "shuffle=True", "parent folder", "list_samples", "exactly when", "CUDA",
             "warmup_batches", "uint8", "centre crop", "torch.randint", "get_worker_info", "CorruptImage", "instead",
             "Let the error out", "Start the clock", "normalise", "float32", "drawn anew", "own stream")


def _todo_comments(text: str) -> str:
    """The text of the TODO comments of a module (each from its TODO line to the end of its comment block)."""
    blocks, current = [], None
    for line in text.splitlines():
        comment = line.strip()[1:].strip() if line.strip().startswith("#") else None
        if comment is not None and "TODO(" in comment:
            current = [comment]
            blocks.append(current)
        elif comment is not None and current is not None:
            current.append(comment)
        else:
            current = None
    return "\n".join(" ".join(block) for block in blocks)


def test_the_todos_give_symptoms_not_fixes() -> None:
    """The capstone teaches diagnosis: a TODO says what the learner would see; the defect and its fix are hints."""
    comments = _todo_comments(STUB.read_text())
    assert comments.count("TODO(ex11") >= 10
    for giveaway in GIVEAWAYS:
        assert giveaway not in comments, f"a TODO of the capstone names its fix ({giveaway!r}): that belongs in the hints"


def test_each_defect_has_hints_that_climb_from_a_nudge_to_the_fix() -> None:
    from grader.hints import check_hints

    levels = check_hints("ex11_training_script")
    for check in (c for c in levels if c in STUB_CHECKS):
        assert len(levels[check]) >= 3, f"{check}: a nudge, the defect, then the fix"
        for giveaway in GIVEAWAYS:
            assert giveaway not in levels[check][0], f"{check}: the first hint gives away {giveaway!r}: start with a nudge"


STUB_CHECKS = set(tomllib.loads((REPO_ROOT / "tests" / "stubs" / "ex11_training_script.toml").read_text())["fails"])


def test_a_run_round_trips_through_its_dict() -> None:
    run = training.TrainingRun([training.EpochRecord(1, 2.0, 0.3, 400.0, 0.1),
                                training.EpochRecord(2, 4.0, 0.6, 410.0, None)], "ci", {"num_workers": 2})
    data = json.loads(json.dumps(run.to_dict()))
    assert training.TrainingRun.from_dict(data) == run
    assert training.time_to_accuracy(run, 0.5) == 4.0 and training.time_to_accuracy(run, 0.9) is None
    assert run.final_accuracy == 0.6


def test_stall_meter_tells_waiting_from_stepping() -> None:
    def slow_batches():
        for _ in range(4):
            time.sleep(0.03)
            yield 1

    meter = training.StallMeter(skip_batches=1)
    wrapped = meter.wrap(list(range(4)))
    assert len(wrapped) == 4
    for _ in meter.iterate(slow_batches()):
        time.sleep(0.01)
    assert meter.batches == 3
    assert 0.6 < meter.stall_fraction < 0.85  # 0.03 s waiting per 0.01 s step: 0.75


def test_the_model_and_step_are_fixed_and_train() -> None:
    training.seed_everything(training.SEED)
    model = training.SmallCNN(10)
    optimizer = training.make_optimizer(model)
    inputs = torch.randn(8, 3, training.IMAGE_SIZE, training.IMAGE_SIZE)
    labels = torch.arange(8) % 10
    first = float(training.train_step(model, optimizer, inputs, labels))
    for _ in range(20):
        last = float(training.train_step(model, optimizer, inputs, labels))
    assert last < first
    assert model(inputs).shape == (8, 10)


def test_charts_draw_one_line_per_run() -> None:
    run = training.TrainingRun([training.EpochRecord(1, 1.0, 0.2, 100.0, 0.5)], "ci")
    ax = training.plot_time_to_accuracy({"original": run, "fixed": run})
    assert len(ax.get_lines()) == 2


def test_every_budget_has_an_accuracy_target_or_says_it_has_none() -> None:
    assert {"ci", "workshop"} <= set(training.EPOCHS)
    assert set(checks.MIN_ACCURACY) <= set(training.EPOCHS)


def test_make_capstone_saves_the_run_in_the_playbooks_format(tmp_path) -> None:
    out = tmp_path / "capstone.json"
    done = subprocess.run([sys.executable, "-m", "grader.capstone", "--target", "solutions", "--epochs", "1",
                           "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LOADERLAB_PROFILE": "ci"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "epoch   1: val accuracy" in done.stdout and "stall" in done.stdout
    run = training.TrainingRun.from_dict(json.loads(out.read_text()))
    assert run.profile == "ci" and len(run.records) == 1 and run.records[0].stall_fraction is not None
    assert run.settings["num_workers"] >= 1


@pytest.mark.parametrize("name", ["RESIZE", "IMAGE_SIZE", "BATCH_SIZE"])
def test_the_checks_use_the_fixed_constants(name: str) -> None:
    assert getattr(checks, name) == getattr(training, name)
