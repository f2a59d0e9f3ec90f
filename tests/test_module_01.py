"""Module 01 as a whole: exercise 01's graded steps, its stub and hints agree; the crop comparison behaves;
notebooks 00 and 01 state their run time and carry the myth boxes; the quiz is there."""

from __future__ import annotations

import inspect
import json
import re

import numpy as np
import pytest

from grader import quiz
from grader.checks import ex01_profile_and_fix as ex01_checks
from grader.checks.ex01_profile_and_fix import (ALIGNED_MEAN_TOLERANCE, ALIGNED_WORST_TOLERANCE, crop_distance,
                                                describe_difference)
from loaderlab.paths import REPO_ROOT

EXERCISE = "ex01_profile_and_fix"
NOTEBOOKS = [REPO_ROOT / "notebooks" / name for name in ("00_setup_and_data.ipynb", "01_sequential_baseline.ipynb")]
MAX_CELL_LINES = 60


def test_crop_distance_forgives_placement_but_not_content() -> None:
    rng = np.random.default_rng(0)
    reference = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    assert crop_distance(reference, reference) == 0
    one_pixel_off = np.roll(reference, 1, axis=1)
    assert crop_distance(one_pixel_off, reference) == 0
    two_pixels_off = np.roll(reference, 2, axis=0)
    assert crop_distance(two_pixels_off, reference) > ALIGNED_WORST_TOLERANCE
    assert crop_distance(reference[..., ::-1], reference) > ALIGNED_WORST_TOLERANCE  # BGR
    smooth = np.repeat(np.repeat(reference[::4, ::4], 4, axis=0), 4, axis=1)
    half = ((smooth[:, :-1].astype(np.int16) + smooth[:, 1:]) // 2).astype(np.uint8)
    half = np.concatenate([half, smooth[:, -1:]], axis=1)
    assert crop_distance(half, smooth) <= ALIGNED_MEAN_TOLERANCE  # half a pixel off, resampled


def _cells(path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_states_its_run_time_on_two_cores(path) -> None:
    opening = "".join(_cells(path)[0]["source"])
    assert re.search(r"\*\*Time:\*\* about [\d.]+ \w+ on 2 cores with the small `ci` profile, [\d.]+ \w+ with `workshop`",
                     opening), f"{path.name}: say at the top how long it takes on 2 cores, ci and workshop"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_code_cell_is_longer_than_one_technique(path) -> None:
    long = [i for i, cell in enumerate(_cells(path)) if cell["cell_type"] == "code" and len(cell["source"]) > MAX_CELL_LINES]
    assert not long, f"{path.name}: split cells {long} into one cell per technique"


def test_myth_boxes_each_come_with_their_measurement() -> None:
    cells = _cells(NOTEBOOKS[1])
    for myth, measured_by in [("returning `None` for a bad image", "default_collate("),
                              ("dividing by `255.0` turns images into float64", "uint8_batch / 255.0")]:
        at = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and myth in "".join(c["source"]))
        assert "Do instead" in "".join(cells[at]["source"]), f"the myth box on {myth!r} says what to do instead"
        following = "".join(cells[at + 1]["source"])
        assert cells[at + 1]["cell_type"] == "code" and measured_by in following, f"measure {myth!r} right after its box"


def test_published_gpu_figures_are_labelled_as_published() -> None:
    for path in NOTEBOOKS:
        text = "".join("".join(c["source"]) for c in _cells(path))
        assert "ASSUMED_STEP_MS" not in text and "STEP_MS = 100" not in text, f"{path.name}: the 100 ms step is gone"
        assert "PUBLISHED_TRAINING_IPS" in text and "not measured here" in text, path.name


def test_quiz_01_has_five_to_nine_questions() -> None:
    """Modules 00 and 01 in one quiz: a question per idea, nine at most since section 5 (decode less) joined."""
    assert 5 <= len(quiz.load("01").questions) <= 9


def _textured(seed: int = 0) -> np.ndarray:
    """A 224 x 224 RGB picture with edges and fine detail: noise over blocks of colour."""
    rng = np.random.default_rng(seed)
    blocks = np.repeat(np.repeat(rng.integers(40, 216, (14, 14, 3)), 16, axis=0), 16, axis=1)
    return np.clip(blocks + rng.integers(-20, 21, blocks.shape), 0, 255).astype(np.uint8)


def test_step5_symptoms_say_where_and_how_the_crop_differs() -> None:
    reference = _textured()
    moved = np.roll(reference, -3, axis=1)  # the reference seen from a window 3 px to the right
    assert "3 px to the right of the reference's" in describe_difference(moved, reference)
    soft = reference.astype(np.float32)
    soft = (soft + np.roll(soft, 1, 0) + np.roll(soft, -1, 0) + np.roll(soft, 1, 1) + np.roll(soft, -1, 1)) / 5
    assert "blurrier than the reference" in describe_difference(soft.astype(np.uint8), reference)
    banded = reference.copy()
    banded[:, -8:] = 255 - banded[:, -8:]
    assert "along the crop's right" in describe_difference(banded, reference)
    tinted = np.clip(reference.astype(np.int16) + (12, 0, 0), 0, 255).astype(np.uint8)
    assert "colours are off" in describe_difference(tinted, reference)


STEP5_RECIPE = ("headroom", "fastupsample", "simplejpeg", "interpolate", "larger scale", "1/2, 1/4 or 1/8",
                "only at", "antialias")


def test_step5_messages_and_todo_name_symptoms_not_the_recipe() -> None:
    """The pixel check reports what it saw; the TODO says what to build and where it is measured. The techniques and
    the margin's size climb through the hints (grader/hints/ex01_profile_and_fix.toml) instead."""
    check = inspect.getsource(ex01_checks.decode_less_crop_matches_reference) + inspect.getsource(describe_difference)
    stub = (REPO_ROOT / "exercises" / f"{EXERCISE}.py").read_text()
    todo = stub[stub.index("# TODO(ex01, step 5)"):]
    for word in STEP5_RECIPE:
        assert word not in check, f"the step 5 pixel check's message names the recipe ({word!r})"
        assert word not in todo, f"TODO(ex01, step 5) names the recipe ({word!r})"


def _section(path, title: str, following: str) -> list[dict]:
    cells = _cells(path)
    start = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith(title))
    end = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith(following))
    return cells[start:end]


# What each decode-less technique of notebook 01, section 5 looks like in code: a cell may measure one or two (the
# second against the first), never assemble exercise 01's step 5 from them.
TECHNIQUES = {"fast upsampling": ("fastupsample=True",), "a vectorised kernel": ("torch_resize(", "interpolate("),
              "a smaller DCT scale": ("draft(", "min_height"), "only the window": ("window_of(", "box=crop_window")}


def test_notebook_01_measures_each_decode_less_technique_alone() -> None:
    section = _section(NOTEBOOKS[1], "## 5. Decode less", "## 6. Exercise 01")
    text = "".join("".join(c["source"]) for c in section)
    for cell in (c for c in section if c["cell_type"] == "code"):
        source = "".join(cell["source"])
        used = [name for name, marks in TECHNIQUES.items() if any(mark in source for mark in marks)]
        assert len(used) <= 2, f"a section 5 cell combines {used}: measure each alone, the exercise combines them"
    assert "decode_jpeg_header" in text and "progressive" in text, "section 5 counts the kinds of JPEG from headers"
    assert "AVX2" in text and "NEON" in text, "section 5 says which CPU the vectorised resize's gain was measured on"
