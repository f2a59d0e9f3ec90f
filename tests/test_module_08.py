"""Module 08 (the capstone): the fixed parts in loaderlab.training, the frozen original the timed check compares
against, the shipped script's TODO and the rule that its messages and first hints give symptoms only, its contract
the interface and the goals only, and its exercise-level hints where and how to measure only, and
`python -m grader.capstone` (make capstone) with its saved run."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from grader import catalog  # noqa: E402
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


CHECKS = REPO_ROOT / "grader" / "checks" / "ex11_training_script.py"
# What the capstone's learner must find alone: where each defect sits, its cause and its fix. None of these words may
# appear in a failure message (any string of the checks module), in the stub's TODO or contract, in a first-level hint
# (the grade summary shows it) or in any level of the exercise's own hints. Each is how a cause or a fix is written (an argument, a helper, a place in the code, a
# rule), never how a symptom is observed: every message says what it saw without one. Found by writing the messages
# and the TODO as symptoms, then grepping the former messages, TODOs and the solution for each defect's fix.
WHERE_IT_SITS = ("TODO(ex11", "__init__", "__getitem__")  # a level-1 hint may say where to look, no more
CAUSES_AND_FIXES = (
    "pin_memory=", "persistent_workers", "persistent", "shuffle=", "worker_init_fn", "get_worker_info",
    "usable_cores", "list_samples", "CorruptImage", "mean_std_on", "torch.randint", "torch.rand(", "np.random",
    "default_rng", "numpy generator", "parent folder", "path string", "fixed position", "ToTensor", "Normalize",
    "draft", "CLASS_POSITION", "collate", "start the clock", "Start the clock", "frozen", "drawn once", "exactly when",
    "instead", "Let the error out", " must ", " should ",
)
# Further words a first-level hint and the TODO keep back (the earlier giveaways): a message may use them to describe
# what it observed ("a torch.float32 tensor", "on a CUDA machine", "the centre 64x64").
LEVEL_ONE_GIVEAWAYS = ("usable_cores", "persistent", "shuffle=True", "parent folder", "list_samples", "exactly when",
                       "CUDA", "warmup_batches", "uint8", "centre crop", "torch.randint", "get_worker_info",
                       "CorruptImage", "instead", "Let the error out", "Start the clock", "normalise", "float32",
                       "drawn anew", "own stream")


# How the contract once stated the fixes (issue 45: a contract read beside the script found nine of the ten defects):
# the behaviour each defect breaks, in the words of its fix. The contract states the interface (names, signatures,
# types and shapes) and the goals a run is measured by; these stay out of it. Words a goal needs to be checked
# ("uint8" of the interface's types, "centre crop" of the reference, "CUDA" of the device) may stay.
CONTRACT_GIVEAWAYS = ("drawn anew", "every worker", "file order", "kept alive", "pin_memory", "per usable core",
                      "left out", "after the copy", "whole batch at once", "shuffle", "non_blocking", "generator",
                      "decoded small", "one by one", "__init__", "__getitem__")


def _contract() -> str:
    return ast.get_docstring(ast.parse(STUB.read_text())) or ""


def test_the_contract_states_the_interface_and_the_goals_not_the_fixes() -> None:
    """The capstone's docstring says what the script must achieve, and what each name takes and returns: the
    behaviours its defects break are found by measuring, not by setting the contract beside the code."""
    contract = _contract()
    assert "The interface" in contract and "The goals" in contract, "the contract has its interface and its goals"
    for name in ("ShapesFolder", "make_loaders", "to_model_input", "train_one_epoch", "evaluate", "time_training",
                 "train", "main"):
        assert f"`{name}(" in contract, f"the contract states {name}'s signature"
    for words in (*WHERE_IT_SITS, *CAUSES_AND_FIXES, *CONTRACT_GIVEAWAYS):
        assert words not in contract, f"the capstone's contract states a fix ({words!r}): say the goal it reaches"
    steps = {check.step for check in catalog.find("ex11_training_script").checks}
    cited = {int(n) for steps in re.findall(r"\(steps? ([\d, ]+)\)", contract) for n in steps.split(",")}
    assert cited == steps - {2}, (
        f"each goal names a step that measures it, and every step but 2 (the interface's types) has a goal: cited "
        f"{sorted(cited)}")


def _todo_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each TODO comment block of a module (from its TODO line to the block's end)."""
    blocks: list[tuple[int, list[str]]] = []
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        comment = line.split("#", 1)[1].strip() if "#" in line else None
        if comment is not None and "TODO" in comment:
            current = [comment]
            blocks.append((number, current))
        elif comment is not None and current is not None and line.strip().startswith("#"):
            current.append(comment)
        else:
            current = None
    return [(number, " ".join(lines)) for number, lines in blocks]


def test_the_stub_has_one_todo_above_the_code_and_none_on_a_defective_line() -> None:
    """One TODO block, after the imports and before the first definition, lists what to investigate; no TODO marks a
    line of the code (a TODO beside a defect would be the answer's address)."""
    text = STUB.read_text()
    blocks = _todo_blocks(text)
    assert len(blocks) == 1, f"the capstone has one TODO block at the top, not {len(blocks)}: {blocks}"
    first_definition = next(number for number, line in enumerate(text.splitlines(), 1)
                            if line.startswith(("class ", "def ", "CLASS_POSITION")))
    assert blocks[0][0] < first_definition, "the TODO block sits above the code, not on a defective line"
    steps = max(check.step for check in catalog.find("ex11_training_script").checks)
    assert blocks[0][1].startswith(f"TODO(ex11, steps 1-{steps}):"), blocks[0][1][:80]


def test_the_todo_lists_symptoms_not_causes_or_fixes() -> None:
    """The capstone teaches diagnosis: the TODO says what the learner would see and how to measure it."""
    (_, block), = _todo_blocks(STUB.read_text())
    block = block.split(":", 1)[1]  # after its own tag
    for words in (*WHERE_IT_SITS, *CAUSES_AND_FIXES, *LEVEL_ONE_GIVEAWAYS):
        assert words not in block, f"the capstone's TODO names a cause or a fix ({words!r}): that belongs in the hints"


def _message_strings() -> list[str]:
    """Every string of the checks module that is not a docstring: each failure message is made of them."""
    tree = ast.parse(CHECKS.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_failure_message_names_where_the_defect_sits_its_cause_or_its_fix() -> None:
    """The grader's messages give what was observed, with figures: the cause and the fix come from the hints, on
    request. Every string of the checks module is read, so a message on any branch is held, not only the stub's."""
    strings = _message_strings()
    assert any("ended normally" in s for s in strings), "the scan must see the messages"
    for words in (*WHERE_IT_SITS, *CAUSES_AND_FIXES):
        offenders = [s for s in strings if words in s]
        assert not offenders, f"an ex11 message names a cause or a fix ({words!r}): {offenders}"


def _shingles(text: str, size: int = 8) -> set[tuple[str, ...]]:
    words = re.findall(r"[\w']+", text.lower())
    return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}


def test_each_check_has_hints_that_climb_from_where_to_look_to_the_fix() -> None:
    """Per check: where to look and how to measure (level 1, the one the grade summary shows: no cause, no fix), then
    the cause, then the fix; no level repeats a failure message (no eight words in a row in common). The exercise's
    own hints, every level, stop at where and how to measure: causes and fixes come one check at a time, on request."""
    from grader.hints import all_hints, check_hints

    levels = check_hints("ex11_training_script")
    assert set(levels) == {check.name for check in catalog.find("ex11_training_script").checks}
    messages = set().union(*map(_shingles, _message_strings()))
    for check, texts in levels.items():
        assert len(texts) >= 3, f"{check}: where to look, the cause, then the fix"
        for words in (*CAUSES_AND_FIXES, *LEVEL_ONE_GIVEAWAYS):
            assert words not in texts[0], f"{check}: the first hint gives away {words!r}: where to look, how to measure"
        for level, text in enumerate(texts, 1):
            assert not _shingles(text) & messages, f"{check}: hint {level} repeats a failure message: {text}"
    causes_and_fixes = set().union(*(_shingles(text) for texts in levels.values() for text in texts[1:]))
    for level, text in enumerate(all_hints()["ex11_training_script"], 1):
        for words in (*WHERE_IT_SITS, *CAUSES_AND_FIXES, *LEVEL_ONE_GIVEAWAYS):
            assert words not in text, f"the exercise's hint {level} gives away {words!r}: it says where and how to measure"
        assert not _shingles(text) & causes_and_fixes, (
            f"the exercise's hint {level} repeats a check's cause or fix (levels 2 and 3 of [checks]): {text}")


def test_the_pin_check_words_a_cuda_machine_as_one(monkeypatch) -> None:
    """Where CUDA is available the check looks at the batches themselves, and a loader that does not pin for a CUDA
    device reads as pageable batches, not as the CPU's warning (a CUDA machine here is torch.cuda.is_available()
    made true; its batches are pageable, as torch pins nothing without an accelerator)."""
    from loaderlab import original_training_script

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)  # so that no loader tries to pin here
    with pytest.raises(AssertionError) as failure:
        checks.batches_pinned_for_the_wrong_device(original_training_script)
    message = str(failure.value)
    assert "'cuda'" in message or "cuda:0" in message or "type='cuda'" in message, message
    assert "pageable memory" in message and "warned" not in message, message


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
