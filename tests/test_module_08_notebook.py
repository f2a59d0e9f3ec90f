"""Notebook 08 (capstone) and `loaderlab.lessons.m08_capstone`: the tools measure what they say, the example's
pieces behave as the notebook finds them, and the notebook teaches the diagnosis on its own example.

The notebook itself runs under `pytest --nbval-lax`; these tests check its helpers on small synthetic images (a few
seconds in all), that the notebook names none of exercise 11's defects or defective constructs, that its helpers
are no dataset with exercise 11's contract, and that it runs from a learner's copy (no `solutions/`) and shows no
GPU figure without a GPU.
"""

from __future__ import annotations

import inspect
import io
import json
import re
import time

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from loaderlab.images import short_side_size
from loaderlab.lessons import m08_capstone as lab
from loaderlab.lessons.m07_device import crop_flip_draws, crop_flip_per_sample
from loaderlab.paths import REPO_ROOT
from loaderlab.training import IMAGE_SIZE, MEAN, RESIZE, STD, WARMUP_BATCHES, SmallCNN

NOTEBOOK = REPO_ROOT / "notebooks" / "08_capstone.ipynb"


def cells(kind: str | None = None) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]
            if kind is None or c["cell_type"] == kind]


def noise_squares(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, RESIZE, RESIZE, 3), dtype=np.uint8)


def jpeg_bytes(width: int, height: int, seed: int = 0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


class Labelled(Dataset):
    """Item i is (a tiny image, labels[i])."""

    def __init__(self, labels: list[int]) -> None:
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.zeros(3, 2, 2, dtype=torch.uint8), self.labels[index]


# ---- the example's images ----------------------------------------------------------------------

@pytest.mark.parametrize("size", [(300, 200), (200, 300), (256, 256)])
def test_decode_square_is_the_centre_square_of_the_short_side_resize(size) -> None:
    blob = jpeg_bytes(*size)
    square = lab.decode_square(blob)
    with Image.open(io.BytesIO(blob)) as image:
        resized = np.asarray(image.convert("RGB").resize(short_side_size(*size, resize=RESIZE), Image.BILINEAR))
    assert square.dtype == np.uint8 and square.shape == (RESIZE, RESIZE, 3)
    assert np.array_equal(square, lab.centre_square(resized, RESIZE))
    assert np.array_equal(lab.decode_squares([blob, blob]), np.stack([square, square]))


def test_jpeg_bytes_decodes_every_read_and_matches_the_squares_decoded_once() -> None:
    blobs = [jpeg_bytes(300, 200, seed) for seed in range(3)]
    per_read = lab.JpegBytes(blobs, [0, 1, 2], augment=True)
    cached = lab.MemoryImages(lab.decode_squares(blobs), [0, 1, 2], "per_read")
    for index in range(3):
        torch.manual_seed(index)
        image, label = per_read[index]
        torch.manual_seed(index)
        assert torch.equal(image, cached[index][0]) and label == index
        assert image.dtype == torch.uint8 and image.shape == (3, IMAGE_SIZE, IMAGE_SIZE)
    assert len({per_read[0][0].numpy().tobytes() for _ in range(8)}) > 1
    centre = lab.JpegBytes(blobs, [0, 1, 2], augment=False)
    assert torch.equal(centre[1][0], centre[1][0])
    assert torch.equal(centre[1][0], lab.MemoryImages(lab.decode_squares(blobs), [0, 1, 2], "centre")[1][0])


def test_random_crop_flip_is_a_crop_of_the_image_or_its_mirror() -> None:
    image = noise_squares(1)[0]
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        crop = lab.random_crop_flip(image, generator=generator)
        assert crop.shape == (IMAGE_SIZE, IMAGE_SIZE, 3)
        assert any(np.array_equal(c, image[t:t + IMAGE_SIZE, l:l + IMAGE_SIZE])
                   for c in (crop, crop[:, ::-1])
                   for t in range(RESIZE - IMAGE_SIZE + 1) for l in range(RESIZE - IMAGE_SIZE + 1))


@pytest.mark.parametrize("augmentation, distinct_reads", [("per_read", True), ("frozen", False), ("centre", False)])
def test_memory_images_draw_per_read_only_when_asked(augmentation, distinct_reads) -> None:
    data = lab.MemoryImages(noise_squares(4), np.arange(4), augmentation)
    reads = {data[2][0].numpy().tobytes() for _ in range(8)}
    assert (len(reads) > 1) is distinct_reads
    assert data[2][0].shape == (3, IMAGE_SIZE, IMAGE_SIZE) and data[2][1] == 2


def test_memory_images_frozen_draws_follow_the_seed_and_the_size() -> None:
    images = noise_squares(6)
    assert torch.equal(lab.MemoryImages(images, np.arange(6), "frozen", seed=1)[3][0],
                       lab.MemoryImages(images, np.arange(6), "frozen", seed=1)[3][0])
    assert any(not torch.equal(lab.MemoryImages(images, np.arange(6), "frozen", seed=1)[i][0],
                               lab.MemoryImages(images, np.arange(6), "frozen", seed=2)[i][0]) for i in range(6))
    assert lab.MemoryImages(images, np.arange(6), "per_read", size=32)[0][0].shape == (3, 32, 32)


def test_memory_images_centre_once_keeps_the_centre_crop_and_flips_it() -> None:
    images = noise_squares(2)
    data = lab.MemoryImages(images, np.arange(2), "centre_once")
    centre = lab.channels_first(lab.centre_square(images[1]))
    reads = [data[1][0] for _ in range(12)]
    assert all(torch.equal(r, centre) or torch.equal(r, centre.flip(-1)) for r in reads)
    assert any(torch.equal(r, centre) for r in reads) and any(torch.equal(r, centre.flip(-1)) for r in reads)


def test_memory_images_refuse_an_unknown_augmentation() -> None:
    with pytest.raises(ValueError, match="per_read"):
        lab.MemoryImages(noise_squares(1), np.arange(1), "random")


def test_batch_crop_flip_gives_each_image_its_own_draw() -> None:
    images = noise_squares(8)
    loader = DataLoader(lab.MemoryImages(images, np.arange(8), "none"), batch_size=8)
    (crops, labels), = list(lab.BatchCropFlip(loader, seed=3))
    draws = crop_flip_draws(8, RESIZE, RESIZE, IMAGE_SIZE, torch.Generator().manual_seed(3))
    assert crops.shape == (8, 3, IMAGE_SIZE, IMAGE_SIZE) and labels.tolist() == list(range(8))
    assert np.array_equal(crops.permute(0, 2, 3, 1).numpy(), crop_flip_per_sample(images, IMAGE_SIZE, *draws))
    assert len({(int(t), int(l), bool(f)) for t, l, f in zip(*draws)}) > 1


# ---- the example's defective pieces behave as the notebook finds them --------------------------------

@pytest.mark.parametrize("size, window", [(200, 64), (130, 32), (10, 64)])
def test_window_shuffle_permutes_within_windows_the_same_way_every_pass(size, window) -> None:
    sampler = lab.WindowShuffle(size, window, seed=5)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == list(range(size)) and first == second and len(sampler) == size
    assert all(start <= index < start + window for position, index in enumerate(first)
               for start in [position // window * window])
    assert first != list(range(size)) and first != list(lab.WindowShuffle(size, window, seed=6))


def test_seed_worker_makes_every_worker_and_epoch_draw_alike_and_the_loaders_own_seeding_does_not() -> None:
    item = lab.MemoryImages(noise_squares(1), np.arange(1), "per_read")

    def views(worker_init_fn, generator=None):
        loader = DataLoader(lab.SameItem(item, 0, 8), batch_size=4, num_workers=2, worker_init_fn=worker_init_fn,
                            generator=generator, timeout=60)
        return lab.augmented_views(loader, epochs=2)

    written = views(lab.seed_worker)
    assert written.shape == (2, 2, 4, IMAGE_SIZE, IMAGE_SIZE, 3)
    assert lab.view_repeats(written) == {"across batches": True, "across epochs": True, "within a batch": False}
    own = lab.view_repeats(views(None, torch.Generator().manual_seed(0)))
    assert own == {"across batches": False, "across epochs": False, "within a batch": False}


# ---- the tools -----------------------------------------------------------------------------------

def test_same_item_reads_one_item_again_and_again() -> None:
    data = lab.SameItem(Labelled([4, 5, 6]), 1, copies=7)
    assert len(data) == 7 and all(data[i][1] == 5 for i in range(7))


def test_view_repeats_tells_each_kind_of_repeat_apart() -> None:
    rng = np.random.default_rng(0)
    reads = rng.integers(0, 256, (2, 2, 3, 4, 4, 3), dtype=np.uint8)
    assert lab.view_repeats(reads) == {"across batches": False, "across epochs": False, "within a batch": False}
    reads[:, 1] = reads[:, 0]
    assert lab.view_repeats(reads)["across batches"] and not lab.view_repeats(reads)["across epochs"]
    reads[1] = reads[0]
    assert lab.view_repeats(reads)["across epochs"]
    reads[:, :, :] = reads[0, 0, 0]
    assert lab.view_repeats(reads)["within a batch"]


def test_show_views_draws_a_row_per_epoch_and_batch() -> None:
    import matplotlib

    matplotlib.use("Agg")
    figure = lab.show_views(np.zeros((2, 3, 4, 8, 8, 3), dtype=np.uint8), workers=3)
    assert len(figure.axes) == 2 * 3 * 4
    assert figure.axes[4].get_ylabel() == "epoch 1\nworker 1" and figure.axes[12].get_ylabel() == "epoch 2\nworker 0"


def test_label_orders_and_same_position_share() -> None:
    labels = [0, 0, 1, 1, 2, 2, 3, 3]
    fixed = DataLoader(Labelled(labels), batch_size=3)
    first, second = lab.label_orders(fixed, epochs=2)
    assert first.tolist() == labels and lab.same_position_share(first, second) == 1.0
    shuffled = DataLoader(Labelled(labels), batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(1))
    orders = lab.label_orders(shuffled, epochs=3)
    assert all(sorted(order.tolist()) == labels for order in orders)
    assert min(lab.same_position_share(orders[0], other) for other in orders[1:]) < 1.0
    assert lab.same_position_share(np.array([1, 2, 3]), np.array([1, 0, 3, 4])) == pytest.approx(2 / 3)
    assert lab.chance_same_position(np.array(labels)) == pytest.approx(0.25)
    assert lab.chance_same_position(np.array([0, 0, 0, 1])) == pytest.approx(0.75 ** 2 + 0.25 ** 2)


def test_labels_per_batch_counts_every_class_in_every_batch() -> None:
    counts = lab.labels_per_batch(DataLoader(Labelled([0, 0, 2, 1, 2, 2, 0]), batch_size=3), num_classes=4)
    assert counts.tolist() == [[2, 0, 1, 0], [0, 1, 2, 0], [1, 0, 0, 0]]


def test_loop_rate_counts_the_batches_after_the_skipped_ones() -> None:
    batches = [(torch.zeros(4), torch.zeros(4))] * 5
    steps = []
    rate, meter = lab.loop_rate(batches, lambda batch: (steps.append(1), time.sleep(0.01)), skip=2)
    assert len(steps) == 5 and meter.batches == 3 and meter.step_s >= 0.025
    assert rate == pytest.approx(12 / (meter.wait_s + meter.step_s))


def test_time_epoch_separates_the_start_up_from_the_steady_state() -> None:
    def late_first_batch():
        time.sleep(0.2)
        for _ in range(6):
            yield torch.zeros(8), torch.zeros(8)

    timing = lab.time_epoch(late_first_batch(), lambda batch: time.sleep(0.005), skip=1)
    assert timing.startup_s >= 0.2 and timing.images == 48 and timing.total_s >= timing.startup_s + 0.03
    assert timing.steady_images_per_s > 2 * timing.images_per_s  # the late first batch weighs only on the whole
    assert timing.images_per_s == pytest.approx(48 / timing.total_s)


def test_seed_verdict_asks_every_seed_of_one_to_beat_every_seed_of_the_other() -> None:
    apart, sentence = lab.seed_verdict("a", [0.40, 0.42, 0.41], "b", [0.30, 0.35, 0.33])
    assert apart and "Every seed of a scored above" in sentence and "+8.3 points" in sentence
    assert "10% of the time" in sentence  # 2 of the 20 ways to order 3 and 3 seeds
    apart, sentence = lab.seed_verdict("a", [0.30, 0.35], "b", [0.40, 0.42, 0.45, 0.41, 0.44])
    assert apart and "Every seed of b scored above" in sentence and "10% of the time" in sentence  # 2 of 21
    apart, sentence = lab.seed_verdict("a", [0.24, 0.30, 0.26], "b", [0.22, 0.25, 0.23])
    assert not apart and "cannot tell them apart" in sentence and "spread up to 6.0 points" in sentence
    apart, sentence = lab.seed_verdict("a", [0.48, 0.50, 0.47, 0.55, 0.45], "b", [0.25, 0.24, 0.34, 0.20, 0.29],
                                       as_percent=False)
    assert apart and "a 0.45-0.55 (mean 0.49)" in sentence and "+0.23" in sentence and "1% of the time" in sentence


def test_model_input_scales_and_normalises_the_whole_batch() -> None:
    images = torch.from_numpy(noise_squares(3)).permute(0, 3, 1, 2)
    expected = (images.double() / 255 - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    result = lab.model_input(images, "cpu")
    assert result.dtype == torch.float32 and torch.allclose(result.double(), expected, atol=1e-5)


def test_accuracy_by_class_leaves_absent_classes_out() -> None:
    by_class = lab.accuracy_by_class(np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0]), 3)
    assert by_class[:2].tolist() == [2 / 3, 1.0] and np.isnan(by_class[2])


def test_train_and_record_records_every_epoch() -> None:
    images = noise_squares(4 * 32)
    labels = np.arange(len(images)) % 2
    train = DataLoader(lab.MemoryImages(images, labels, "per_read"), batch_size=32, shuffle=True)
    val = DataLoader(lab.MemoryImages(images[:32], labels[:32], "centre"), batch_size=32)
    run, model, train_loss = lab.train_and_record(lambda: SmallCNN(2), train, val, 2,
                                                  settings={"augmentation": "per_read"})
    assert [r.epoch for r in run.records] == [1, 2] and run.records[0].wall_s < run.records[1].wall_s
    assert all(0 <= r.val_accuracy <= 1 and r.images_per_s > 0 and 0 <= r.stall_fraction <= 1 for r in run.records)
    assert run.settings["epochs"] == 2 and run.settings["augmentation"] == "per_read" and len(train) > WARMUP_BATCHES
    assert isinstance(model, SmallCNN) and not model.training  # evaluated last
    assert len(train_loss) == 2 and all(0 < loss < 10 for loss in train_loss)


# ---- what the notebook teaches, and on what ------------------------------------------------------

# Exercise 11's defective constructs and the script's own names: the notebook diagnoses its own example, so a
# learner meets these only in the exercise.
EX11_CONSTRUCTS = ("CLASS_POSITION", "ShapesFolder", "collate_skipping_none", "original_training_script", "shipped",
                   "to_model_input", "time_training", "make_loaders", "train_one_epoch", "self.rng.shuffle",
                   "self.top", "transforms.Normalize", "ToTensor", "'pin_memory' argument is set as true",
                   "returns None", "return None",
                   # ... and exercise 11's defects in words (issue 33 quotes the sentences these come from)
                   "freezes its augmentation", "shuffles once", "augments its validation", "augmented validation",
                   "in `__init__`", "copied into every worker", "fixed path position", "normalised per image")


def test_no_cell_names_an_exercise_11_defect_or_its_constructs() -> None:
    for cell in cells():
        assert not re.search(r"ex11[a-j]", cell, re.IGNORECASE), f"a cell names an exercise 11 defect: {cell[:200]}"
        for construct in EX11_CONSTRUCTS:
            assert construct not in cell, f"a cell names exercise 11's {construct!r}: {cell[:200]}"


TOOLS = ("lab.loop_rate(", "meter.stall_fraction", "lab.label_orders(", "lab.same_position_share(",
         "lab.labels_per_batch(", "lab.SameItem(", "lab.augmented_views(", "lab.show_views(", "lab.predictions(",
         "lab.time_epoch(", "lab.seed_verdict(", "plot_time_to_accuracy(")


def test_each_diagnosis_tool_is_used_on_the_example_then_again_after_its_fix() -> None:
    code = "\n".join(cells("code"))
    for tool in TOOLS:
        assert tool in code, f"the notebook never uses {tool}"
    for measured_again in ("three_rates(", "lab.label_orders(", "probe(", "evaluate_twice(", "two_epochs("):
        calls = code.count(measured_again) - code.count(f"def {measured_again}")
        assert calls >= 2, f"{measured_again} should measure the example as written, then measure it fixed"


def test_the_lesson_helpers_are_no_dataset_with_exercise_11s_contract() -> None:
    """The helpers measure, compare and draw; the example's datasets take bytes or arrays, never a folder."""
    source = inspect.getsource(lab)
    for name in ("ShapesFolder", "make_loaders", "to_model_input", "train_one_epoch", "evaluate", "time_training"):
        assert not hasattr(lab, name), f"m08_capstone defines {name}, a name of exercise 11's contract"
    for folder_reading in ("list_samples", "iterdir", "glob(", "Path("):
        assert folder_reading not in source, f"m08_capstone reads a folder ({folder_reading})"
    for name, member in inspect.getmembers(lab, inspect.isclass):
        if issubclass(member, Dataset) and member.__module__ == lab.__name__:
            parameters = list(inspect.signature(member.__init__).parameters)[1:]
            assert not {"split_dir", "root", "path", "train"} & set(parameters), f"{name}({parameters})"


def test_the_notebook_opens_with_what_you_learn_and_ends_with_measured_checklist_and_exercise_11() -> None:
    markdown = cells("markdown")
    assert "## What you will learn" in markdown[0]
    assert any("## What you measured" in cell for cell in markdown)
    assert "## Checklist" in markdown[-1] and "## Next" in markdown[-1] and "exercises/ex11_training_script.py" in markdown[-1]


def test_the_league_ceiling_is_described_as_a_whole_frame_decode() -> None:
    text = "\n".join(cells("markdown"))
    assert "least decoding this work needs" not in text
    assert "whole frame at the smallest power-of-two DCT scale" in text and "fastupsample" in text


def test_the_accuracy_verdict_is_computed_from_the_seeds_of_this_run() -> None:
    cell = next(cell for cell in cells("code") if "lab.seed_verdict(" in cell)
    assert "ACCURACY_SEEDS" in cell and "verdict}" in cell and "train_loss" in cell


def test_notebook_runs_without_solutions_and_invents_no_gpu_figure() -> None:
    """A learner's copy has no solutions/; without CUDA the GPU section says why and measures nothing."""
    code = "\n".join(cells("code"))
    assert "solutions" not in code
    gpu_cell = next(cell for cell in cells("code") if "resnet18" in cell)
    assert gpu_cell.startswith("NO_CUDA = cuda_missing_reason()\nif NO_CUDA:")
    skipped_branch = gpu_cell.split("else:")[0]
    assert "measured[" not in skipped_branch and "plot" not in skipped_branch


def test_notebook_says_how_long_it_takes_on_two_cores() -> None:
    first = cells()[0]
    assert "How long it takes:" in first and "2-core" in first and "ci" in first
