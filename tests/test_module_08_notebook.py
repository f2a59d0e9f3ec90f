"""Notebook 08 (capstone) and `loaderlab.lessons.m08_capstone`: the pieces the notebook measures with do what it says.

The notebook itself runs under `pytest --nbval-lax`; these tests check its helpers on small synthetic images (a
few seconds in all) and that the notebook runs from a learner's copy (no `solutions/`) and shows no GPU figure
without a GPU.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from loaderlab.lessons import m08_capstone as lab
from loaderlab.lessons.m07_device import crop_flip_draws, crop_flip_per_sample
from loaderlab.paths import REPO_ROOT
from loaderlab.training import IMAGE_SIZE, MEAN, RESIZE, STD, WARMUP_BATCHES, SmallCNN

NOTEBOOK = REPO_ROOT / "notebooks" / "08_capstone.ipynb"


def code_cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]


def noise_squares(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, RESIZE, RESIZE, 3), dtype=np.uint8)


@pytest.fixture()
def image_folder(tmp_path):
    """split/<class>/<file>.jpg: two classes, three noise JPEGs each, landscape and portrait."""
    rng = np.random.default_rng(1)
    for name in ("b_class", "a_class"):
        (tmp_path / name).mkdir()
        for i, size in enumerate(((300, 200), (200, 300), (256, 256))):
            pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / name / f"{i}.jpg", quality=90)
    return tmp_path


def test_draft_short_side_resizes_the_short_side(image_folder) -> None:
    landscape = lab.draft_short_side(image_folder / "a_class" / "0.jpg")
    portrait = lab.draft_short_side(image_folder / "a_class" / "1.jpg")
    assert landscape.dtype == np.uint8 and landscape.shape == (RESIZE, RESIZE * 3 // 2, 3)
    assert portrait.shape == (RESIZE * 3 // 2, RESIZE, 3)


def test_draft_folder_labels_by_sorted_class_folder_and_crops_the_centre_without_augmentation(image_folder) -> None:
    data = lab.DraftFolder(image_folder, augment=False)
    assert data.targets == [0, 0, 0, 1, 1, 1]  # a_class first: sorted names, not the order they were made
    image, label = data[4]
    assert image.dtype == torch.uint8 and image.shape == (3, IMAGE_SIZE, IMAGE_SIZE) and label == 1
    expected = lab.centre_square(lab.draft_short_side(image_folder / "b_class" / "1.jpg"))
    assert torch.equal(image, lab.channels_first(expected)) and torch.equal(data[4][0], image)


def test_draft_folder_draws_a_new_crop_on_every_read(image_folder) -> None:
    data = lab.DraftFolder(image_folder, augment=True)
    reads = {data[0][0].numpy().tobytes() for _ in range(6)}
    assert len(reads) > 1


def test_random_crop_flip_is_a_crop_of_the_image_or_its_mirror() -> None:
    image = noise_squares(1)[0]
    rng = np.random.default_rng(0)
    for _ in range(20):
        crop = lab.random_crop_flip(image, rng)
        assert crop.shape == (IMAGE_SIZE, IMAGE_SIZE, 3)
        found = any(np.array_equal(c, image[t:t + IMAGE_SIZE, l:l + IMAGE_SIZE])
                    for c in (crop, crop[:, ::-1])
                    for t in range(RESIZE - IMAGE_SIZE + 1) for l in range(RESIZE - IMAGE_SIZE + 1))
        assert found


@pytest.mark.parametrize("augmentation, distinct_reads", [("per_read", True), ("frozen", False), ("centre", False)])
def test_memory_images_draw_per_read_only_when_asked(augmentation, distinct_reads) -> None:
    images = noise_squares(4)
    data = lab.MemoryImages(images, np.arange(4), augmentation)
    reads = {data[2][0].numpy().tobytes() for _ in range(8)}
    assert (len(reads) > 1) is distinct_reads
    assert data[2][0].shape == (3, IMAGE_SIZE, IMAGE_SIZE) and data[2][1] == 2


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
    run, model = lab.train_and_record(lambda: SmallCNN(2), train, val, 2, settings={"augmentation": "per_read"})
    assert [r.epoch for r in run.records] == [1, 2] and run.records[0].wall_s < run.records[1].wall_s
    assert all(0 <= r.val_accuracy <= 1 and r.images_per_s > 0 and 0 <= r.stall_fraction <= 1 for r in run.records)
    assert run.settings["epochs"] == 2 and run.settings["augmentation"] == "per_read" and len(train) > WARMUP_BATCHES
    assert isinstance(model, SmallCNN) and not model.training  # evaluated last


def test_notebook_runs_without_solutions_and_invents_no_gpu_figure() -> None:
    """A learner's copy has no solutions/; without CUDA the GPU section says why and measures nothing."""
    code = "\n".join(code_cells())
    assert "solutions" not in code
    gpu_cell = next(cell for cell in code_cells() if "resnet18" in cell)
    assert gpu_cell.startswith("NO_CUDA = cuda_missing_reason()\nif NO_CUDA:")
    skipped_branch = gpu_cell.split("else:")[0]
    assert "measured[" not in skipped_branch and "plot" not in skipped_branch


def test_notebook_says_how_long_it_takes_on_two_cores() -> None:
    first = "".join(json.loads(NOTEBOOK.read_text())["cells"][0]["source"])
    assert "How long it takes:" in first and "2-core" in first and "ci" in first
