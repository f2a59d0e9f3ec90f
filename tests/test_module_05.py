"""Module 05 (tf.data, exercise 07, notebook 05): the errata fixed and the promises of issues 11 and 12 kept.

Each test here failed on the code before the fix it guards: folder_label's silent label 0, the
`*.jpg` pattern that disagreed with list_samples, checks without steps or hints, a stub that
spelled out the code, a notebook cell of 80 lines, and grader lines printed as the learner's output.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from grader import hints, quiz
from grader.runner import run_check
from loaderlab.images import list_samples, mean_abs_difference, reference_crop
from loaderlab.paths import REPO_ROOT, dataset_dir

tf = pytest.importorskip("tensorflow")

from loaderlab import tfdata  # noqa: E402  (after TensorFlow is known to be there)
from loaderlab.lessons import m05_tfdata  # noqa: E402

EXERCISE = "ex07_tfdata_pipeline"
STUB = REPO_ROOT / "exercises" / f"{EXERCISE}.py"
NOTEBOOK = REPO_ROOT / "notebooks" / "05_tfdata_ordering.ipynb"
PLANTED = REPO_ROOT / "tests" / "planted"
LONGEST_CELL = 60  # lines: one technique per cell


# ---- erratum: folder_label must fail loudly ----------------------------------------------------

def test_folder_label_gives_the_index_of_a_known_folder() -> None:
    classes = tf.constant(["circles", "crosses", "grid"])
    assert int(tfdata.folder_label(tf.constant("/data/train/grid/a.jpg".replace("/", os.sep)), classes)) == 2


def test_folder_label_raises_for_an_unknown_folder_eagerly_and_in_a_pipeline() -> None:
    classes = tf.constant(["circles", "crosses", "grid"])
    stranger = "/data/train/zigzag/a.jpg".replace("/", os.sep)
    with pytest.raises(tf.errors.InvalidArgumentError, match="zigzag"):
        tfdata.folder_label(tf.constant(stranger), classes)
    labels = tf.data.Dataset.from_tensor_slices([stranger]).map(lambda path: tfdata.folder_label(path, classes))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not one of the class folders"):
        list(labels)


# ---- erratum: one definition of an image file --------------------------------------------------

@pytest.fixture(scope="module")
def mixed_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A split whose images are .jpg, .jpeg, .JPG and .png files (made from the ci dataset's JPEGs)."""
    root = tmp_path_factory.mktemp("mixed") / "train"
    sources = list_samples(dataset_dir() / "train")
    by_class: dict[int, list[Path]] = {}
    for sample in sources:
        by_class.setdefault(sample.label, []).append(sample.path)
    for label, paths in list(by_class.items())[:3]:
        folder = root / paths[0].parent.name
        folder.mkdir(parents=True)
        for suffix, path in zip((".jpg", ".jpeg", ".JPG", ".png"), paths):
            target = folder / f"{path.stem}{suffix}"
            if suffix == ".png":
                Image.open(path).convert("RGB").save(target)
            else:
                target.write_bytes(path.read_bytes())
    return root


def test_image_paths_are_list_samples_files_in_its_order(mixed_tree: Path) -> None:
    assert tfdata.image_paths(mixed_tree) == [str(s.path) for s in list_samples(mixed_tree)]
    assert {Path(p).suffix for p in tfdata.image_paths(mixed_tree)} == {".jpg", ".jpeg", ".JPG", ".png"}


def test_naive_pipeline_reads_every_image_file_list_samples_sees(mixed_tree: Path) -> None:
    samples = list_samples(mixed_tree)
    batches = list(tfdata.naive_pipeline(mixed_tree, 5).as_numpy_iterator())
    images = np.concatenate([images for images, _ in batches])
    labels = np.concatenate([labels for _, labels in batches]).tolist()
    assert labels == [s.label for s in samples]
    worst = max(mean_abs_difference(image, reference_crop(s.path)) for image, s in zip(images, samples))
    assert worst < 3.0, f"PNG and JPEG crops should match the Pillow reference within 3.0, worst {worst:.2f}"


def test_the_solution_pipeline_sees_the_same_files(mixed_tree: Path) -> None:
    from solutions.ex07_tfdata_pipeline import build_pipeline

    labels = [int(label) for _, batch in build_pipeline(str(mixed_tree), 4, False, 0) for label in batch]
    assert labels == [s.label for s in list_samples(mixed_tree)]


def test_decode_center_crop_decodes_a_png_like_its_jpeg(mixed_tree: Path) -> None:
    png = next(mixed_tree.glob("*/*.png"))
    crop = tfdata.decode_center_crop(tf.io.read_file(str(png))).numpy()
    assert crop.dtype == np.uint8 and crop.shape == (224, 224, 3)
    assert mean_abs_difference(crop, reference_crop(png)) < 3.0


def test_no_glob_pattern_of_its_own_remains() -> None:
    """The file list comes from list_samples only: no second definition (a `*.jpg` pattern) anywhere in module 05."""
    notebook_code = "\n".join("".join(c["source"]) for c in _cells() if c["cell_type"] == "code")
    sources = {path.name: path.read_text() for path in
               (REPO_ROOT / "loaderlab" / "tfdata.py", STUB, REPO_ROOT / "solutions" / f"{EXERCISE}.py")}
    for name, text in {**sources, NOTEBOOK.name: notebook_code}.items():
        assert "IMAGE_PATTERN" not in text and "list_files(" not in text, name


# ---- erratum: TensorFlow's default IDCT made almost all of the crop's pixel error ---------------

def _colour_or_grey_jpegs(count: int) -> list[Path]:
    """`count` training JPEGs spread over the classes, in colour or grey (a CMYK file adds a colour conversion of its own)."""
    def plain(path: Path) -> bool:
        with Image.open(path) as image:
            return image.format == "JPEG" and image.mode in ("RGB", "L")

    paths = [s.path for s in list_samples(dataset_dir() / "train") if plain(s.path)]
    return paths[:: max(1, len(paths) // count)][:count]


def test_decode_center_crop_decodes_jpegs_with_the_accurate_idct() -> None:
    """TF's default, fast IDCT put every ci crop 0.90-1.53 from the reference; the accurate one 0.13-0.19 (250 files)."""
    worst = max(mean_abs_difference(tfdata.decode_center_crop(tf.io.read_file(str(path))).numpy(), reference_crop(path))
                for path in _colour_or_grey_jpegs(10))
    assert worst < 0.5, f"decode_center_crop is {worst:.2f} from the reference: is the JPEG decoded with the fast IDCT?"


def test_the_accurate_idct_decodes_jpegs_as_pillow_does() -> None:
    """Notebook 05's claim: tf.io.decode_jpeg with dct_method="INTEGER_ACCURATE" gives Pillow's pixels, bit for bit;
    TensorFlow's default does not."""
    for path in _colour_or_grey_jpegs(3):
        data = tf.io.read_file(str(path))
        pillow = np.asarray(Image.open(path).convert("RGB"))
        assert np.array_equal(tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE").numpy(), pillow), path
        assert not np.array_equal(tf.io.decode_jpeg(data, channels=3).numpy(), pillow), path


# ---- the ladder of notebook 05 matches the exercise's contract -----------------------------------

def test_the_vectorised_flip_draws_once_per_image() -> None:
    """Notebook 05's vectorised flip (after batch) flips each image on its own, as exercise 07 requires."""
    images = tf.broadcast_to(tf.range(224, dtype=tf.int32)[None, None, :, None], (64, 224, 224, 3))
    flipped = tf.image.random_flip_left_right(tf.cast(images % 256, tf.uint8)).numpy()
    per_image = flipped[:, 0, 0, 0] != 0  # a flipped image starts with column 223
    assert 0 < per_image.sum() < len(per_image)


def test_ladder_pipeline_adds_one_technique_at_a_time() -> None:
    samples = list_samples(dataset_dir() / "train")[:12]
    classes = tf.constant(sorted({s.path.parent.name for s in samples}))
    read = tf.io.read_file
    for use in (m05_tfdata.Techniques(), m05_tfdata.Techniques(prefetch=True, interleave=True, parallel=True, vectorised=True, cache="")):
        labels = [int(label) for _, batch in m05_tfdata.ladder_pipeline([str(s.path) for s in samples], classes, read, use, 4)
                  for label in batch]
        assert sorted(labels) == sorted(s.label for s in samples)


# ---- exercise 07: steps, stub, hints --------------------------------------------------------------

def test_the_stub_says_what_to_build_not_the_code() -> None:
    comments = "\n".join(line for line in STUB.read_text().splitlines() if line.strip().startswith("#"))
    for giveaway in ("tf.argmax", "stateless_random_flip_left_right(", "shuffle(", "Dataset.random(", ".batch(",
                     "prefetch(", "reshuffle_each_iteration", "tf.equal("):
        assert giveaway not in comments, f"the stub's TODOs spell out {giveaway!r}: that belongs in the upper hints"


def test_the_hints_climb_from_a_nudge() -> None:
    climbing = hints.all_hints()[EXERCISE]
    assert len(climbing) >= 4
    first = climbing[0]
    for giveaway in ("shuffle(", "batch(", "prefetch(", "Dataset.random", "->"):
        assert giveaway not in first, f"the first hint gives away {giveaway!r}: start with a nudge"


# ---- nothing but the learner's output under "your code printed" -----------------------------------

def test_a_failing_check_shows_no_output_that_is_not_the_learners() -> None:
    result = run_check(PLANTED / "ex07_flips_whole_batch", EXERCISE, "each_image_flipped_on_its_own", timeout_s=120)
    assert result.status == "fail"
    assert result.output.strip() == "", f"the grading process printed:\n{result.output}"


# ---- notebook 05 and quiz 05 ------------------------------------------------------------------------

def _cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text())["cells"]


def test_no_notebook_cell_is_longer_than_one_technique() -> None:
    long = [(i, len("".join(c["source"]).splitlines())) for i, c in enumerate(_cells())
            if c["cell_type"] == "code" and len("".join(c["source"]).splitlines()) > LONGEST_CELL]
    assert not long, f"cells (index, lines) over {LONGEST_CELL} lines: {long}"


def test_the_notebook_states_its_duration_and_busts_the_myths() -> None:
    markdown = ["".join(c["source"]) for c in _cells() if c["cell_type"] == "markdown"]
    assert re.search(r"takes about .* on 2 cores", markdown[0]), "say at the top how long the notebook takes on 2 cores"
    text = "\n".join(markdown)
    assert "Myth" in text and "extra I/O" in text and "from_tensors" in text


def test_the_quiz_has_5_to_8_questions_grounded_in_the_notebook() -> None:
    module = quiz.load("05")
    assert 5 <= len(module.questions) <= 8
    assert all(quiz.grade(module, [q.answer for q in module.questions]))
    assert all("notebook" in q.why or "measur" in q.why for q in module.questions), "ground every `why` in notebook 05"
