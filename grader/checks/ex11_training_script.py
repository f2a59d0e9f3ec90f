"""Checks for exercise 11 (the capstone: fix a real training script). One check per planted defect of the shipped
script, each measuring on its own, and cheaply, the symptom a practitioner would observe (a few items, a sampler's
indices, one small folder's epochs), then the timed and trained checks against the frozen original
(`loaderlab.original_training_script`).

A failure says what was observed, with its figures and setting, never the cause or the fix: finding the cause is the
exercise, and the hints give it on request (`make hint EX=ex11 CHECK=<check> LEVEL=2`, then 3).
`tests/test_module_08.py` holds that rule over every string of this module.

The temporary data folders these checks build sit at the depth of the real data folder (under `.grader/`), so only
the label check, which moves the depth on purpose, sees a split somewhere else.
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from grader.results import Measured
from grader.support import assert_pixels_within, in_promised_type, relative_str, no_leaks, require, within
from loaderlab.bench import Comparison, compare, count_batch
from loaderlab.images import (broken_files, decode_rgb, file_encodings, list_samples, mean_abs_difference,
                              spread_samples)
from loaderlab.machine import usable_cores
from loaderlab.paths import GRADER_DIR, active_profile, dataset_dir
from loaderlab.training import (BATCH_SIZE, IMAGE_SIZE, MEAN, RESIZE, SEED, STD, SmallCNN, StallMeter, epochs_for,
                                make_optimizer, seed_everything, time_to_accuracy, train_step)

# What these checks and the exercise import: a waiting grading process imports them once (grader.preload).
PRELOAD = ("torch", "torchvision")

NORMALISE_TOLERANCE = 1e-5   # to_model_input against (x / 255 - MEAN) / STD in float32: rounding only
# Val items against the reference (full decode, Pillow bilinear resize of the short side to RESIZE, centre crop; the
# nearest of the roundings the contract leaves open, reference_centre_crops), on EVERY val image of the profile.
# Measured on ci's 50 val images (one run; decoding is deterministic): the solution's JPEG draft mode + resize 2.6
# levels on average, 8.0 at worst; torchvision's Resize(RESIZE) + CenterCrop(IMAGE_SIZE), on PIL images or on
# decode_image tensors, 0.0 (against one rounding only, 3.0 and 20.6: its long side is truncated, not rounded);
# v2.Resize without antialias 5.8 and 13.3; a nearest-neighbour resize 6.9 and 15.2; the resize squashed to a square
# 22.4; resized to IMAGE_SIZE, not RESIZE, 18.0; a top-left crop 36.6; a flipped centre crop 37.3.
VAL_MEAN_TOLERANCE = 6.0
VAL_WORST_TOLERANCE = 14.0
VAL_MOST = 200              # val images compared at most (ci has 50: all of them; of workshop's 1000, 200 spread evenly)
VAL_TWICE = 10               # items read twice, to see that the val split is not augmented
READS_PER_ITEM = 6           # reads of one train item: a fresh crop and flip each time repeats all 6 with p < 1e-6
MAX_KEPT_NEIGHBOURS = 0.2    # share of epoch 2's consecutive pairs that were neighbours in epoch 1 (a new
                             # order of ci's 200 keeps about 1%)
CLASSES = 10                 # the dataset's classes (data_gen.CLASSES): the outputs of the checks' stand-in models
WARMUPS_FOR_TIMING = (1, 3)  # warm-up batches the time_training check passes (the default, 2, is neither)
TIMING_BATCHES = 6           # batches of the time_training check's loader (its count is exact: a few suffice)
SLOW_FIRST_BATCH_S = 0.5     # the first batch of the time_training check's loader comes this late
TIMED_BATCHES = 5            # training batches per timed round (after one untimed batch), on any profile
# Training throughput against the frozen original, per core free while timing (loaderlab.machine.free_cores; a busy
# machine asks less): 1.6x on an idle 2-core machine. Measured on this 2-core box, 5 batches per round, 3 interleaved
# rounds: ci, 3 runs: the solution 3.51x (2.0 free), 2.94x (1.6 free), 3.68x (1.2 free), single rounds 2.75-3.95x;
# workshop, 2 runs: 2.00x (2.0 free, rounds 1.90-2.17x) and 2.01x (1.6 free, rounds 1.99-2.04x). ci's short epochs
# (7 batches) let the workers fall idle, so the model gets both cores; on workshop's long epochs two workers and the
# model's two threads share the 2 cores, which is the steady state. The original against itself: 0.96x and 0.97x
# (ci, 2.0 free; 2 runs).
ORIGINAL_TARGET_PER_FREE_CORE = 0.8
ORIGINAL_TARGET_CAP = 1.6
# Data-stall fraction of one training epoch after a warm-up (StallMeter, the first batch of the pass left out).
# Measured on this 2-core box: ci (6 batches), 3 runs: the solution 3-4%; workshop (10 batches), 1 run: 3%;
# `make capstone` on workshop, 8 epochs: 3-4% every epoch. The original 75% (ci, 2 runs).
MAX_STALL_FRACTION = 0.3
# Val accuracy after the profile's epoch budget (loaderlab.training.EPOCHS), trained by grader.capstone's driver with
# the fixed model, optimiser and seed, as the mean of the script's own evaluate over the budget's last ACCURACY_EPOCHS
# epochs (ci's val split is 50 images: one epoch's figure moves by 0.1 from epoch to epoch). A floor, not a proof of
# the fixes: at this budget the shipped script reaches the same accuracy, on both profiles. What its defects cost is
# time (the throughput and stall checks, against the original in the same run) and figures that cannot be trusted
# (steps 7 and 9); what the floor catches is a data side that stops the model learning. Measured on this 2-core box
# (2026-11-28, grader.capstone.train_measured, one run per seed; a run is deterministic: seed 0 twice gave the same
# twelve figures), the mean of the last 3 epochs:
# - ci, 12 epochs, seeds 0-4 (under the CPU lock): the solution 0.347, 0.347, 0.287, 0.293, 0.360 (the grader uses
#   seed 0; the worst seed sits 0.037 above the floor, about two of the 50 val images an epoch); the shipped script
#   0.373, 0.340, 0.333, 0.247, 0.373; a random crop of the full image instead of the resized one
#   (tests/planted/ex11_random_crop_of_the_full_image) 0.153, 0.153, 0.167, 0.213, 0.133. Neither the models'
#   accuracy on the grader's own centre crops (reference_centre_crops: solution 0.293-0.373, shipped 0.307-0.393) nor
#   the gap to their train accuracy told the shipped script from the solution either. 12 epochs took 16-38 s (the
#   solution), 32-79 s (shipped), 10-25 s (planted).
# - workshop, 8 epochs, seed 0 (beside other work: no time quoted): the solution 0.730, the shipped script 0.766, the
#   planted full-image crop 0.106 (chance is 0.1); the floor sits 0.13 below the solution. Seeds 1-2 were not
#   re-measured with today's solution.
ACCURACY_EPOCHS = 3
MIN_ACCURACY = {"ci": 0.25, "workshop": 0.6}


# ---- helpers ----------------------------------------------------------------------------------

@contextmanager
def _data_root(deeper: int = 0) -> Iterator[Path]:
    """An empty temporary data folder at the real data folder's depth (plus `deeper` levels), removed afterwards."""
    GRADER_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="capstone-", dir=GRADER_DIR) as tmp:
        root = Path(tmp)
        depth = len(dataset_dir().parts) + deeper
        while len(root.parts) < depth:
            root = root / "deeper"
        root.mkdir(parents=True, exist_ok=True)
        yield root


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target.resolve())


def _link_samples(samples: list[Any], split_dir: Path) -> None:
    for path, _ in samples:
        _link(path, split_dir / path.parent.name / path.name)


def _spread(split: str, per_class: int) -> list[Any]:
    """The first `per_class` samples of every class of a split of the active dataset."""
    taken: Counter[int] = Counter()
    chosen = []
    for sample in list_samples(dataset_dir() / split):
        if taken[sample.label] < per_class:
            taken[sample.label] += 1
            chosen.append(sample)
    return chosen


def _small_copy(root: Path, val_per_class: int = 1) -> None:
    """A small data folder in `root`: one train image per class, `val_per_class` val images per class."""
    _link_samples(_spread("train", 1), root / "train")
    _link_samples(_spread("val", val_per_class), root / "val")


def _as_array(image: Any) -> np.ndarray:
    import torch

    return image.detach().cpu().numpy() if isinstance(image, torch.Tensor) else np.asarray(image)


def _same_up_to_flip(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(a, b) or np.array_equal(a, b[..., ::-1])


def _described(value: Any) -> str:
    """What a value is, as a message shows it: a tensor's dtype and shape, else its type."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return f"a {type(value).__name__}"
    return f"a {getattr(value, 'dtype', '?')} {type(value).__name__.lower()} of shape {tuple(shape)}"


def _loaders(ex: ModuleType, data_dir: Path, device: Any = "cpu", **options: Any) -> tuple[Any, Any]:
    import torch

    device = torch.device(device) if isinstance(device, str) else device
    made = require(ex, "make_loaders")(data_dir, device, **options)
    assert isinstance(made, tuple) and len(made) == 2, (
        f"make_loaders(data_dir, {device!r}) returned {_described(made)}, not a (train_loader, val_loader) pair")
    return made


def _item(dataset: Any, index: int, what: str) -> tuple[Any, Any]:
    item = within(30, f"{what}[{index}]", lambda: dataset[index])
    assert isinstance(item, (tuple, list)) and len(item) == 2, (
        f"{what}[{index}] returned {_described(item)}, not an (image, label) pair")
    return item[0], item[1]


def reference_centre_crops(path: Path) -> list[np.ndarray]:
    """uint8 (3, IMAGE_SIZE, IMAGE_SIZE) references: full decode, short side resized to RESIZE (Pillow bilinear),
    centre crop; one per way of rounding that the contract leaves open (the long side rounded or truncated, as
    torchvision's Resize does; the crop's offset floored or rounded, as torchvision's CenterCrop does)."""
    from PIL import Image

    image = decode_rgb(path)
    scale = RESIZE / min(image.size)
    sizes = {(max(RESIZE, rounding(image.width * scale)), max(RESIZE, rounding(image.height * scale)))
             for rounding in (round, int)}
    crops = []
    for width, height in sorted(sizes):
        array = np.asarray(image.resize((width, height), Image.BILINEAR))
        for top in sorted({(height - IMAGE_SIZE) // 2, int(round((height - IMAGE_SIZE) / 2))}):
            for left in sorted({(width - IMAGE_SIZE) // 2, int(round((width - IMAGE_SIZE) / 2))}):
                crops.append(np.ascontiguousarray(array[top:top + IMAGE_SIZE, left:left + IMAGE_SIZE].transpose(2, 0, 1)))
    return crops


def _is_uint8_item(image: Any) -> bool:
    import torch

    return isinstance(image, torch.Tensor) and image.dtype == torch.uint8 and tuple(image.shape) == (
        3, IMAGE_SIZE, IMAGE_SIZE)


# ---- step 1: a broken file ----------------------------------------------------------------------

def epoch_with_a_broken_file_ends_silently(ex: ModuleType) -> None:
    shapes_folder = require(ex, "ShapesFolder")
    broken = sorted(broken_files(dataset_dir()).items())
    kinds = {kind: path for path, kind in reversed(broken)}  # the first file of each kind
    with _data_root() as root:
        _small_copy(root)
        for kind, path in sorted(kinds.items()):
            _link(path, root / "train" / path.parent.name / f"broken_{kind}.jpg")
        files = len(list((root / "train").glob("*/*.jpg")))
        folder = (f"a train folder of {files} files, {len(kinds)} of which do not decode "
                  f"({', '.join(f'broken_{kind}.jpg' for kind in sorted(kinds))})")

        def epoch() -> tuple[int, str | None]:
            train_loader, _ = _loaders(ex, root, num_workers=0)
            images = 0
            try:
                for _, labels in train_loader:
                    images += len(labels)
            except NotImplementedError:
                raise
            except Exception as err:
                return images, f"{type(err).__name__}: {err}"
            return images, None

        images, error = within(60, "an epoch of make_loaders(folder, cpu, num_workers=0)", epoch)
        setting = f"an epoch of the train loader (make_loaders(folder, cpu, num_workers=0)) over {folder}"
        assert error is not None, f"{setting} ended normally, with {images} of {files} images and no error."
        assert "broken_" in error, f"{setting} stopped with {error}, which names none of those files."
        what = "ShapesFolder(train folder, train=False)"
        dataset = within(30, what, lambda: shapes_folder(root / "train", False))
        errors: dict[int, str] = {}
        for index in range(len(dataset)):
            try:
                within(30, f"{what}[{index}]", lambda: dataset[index])
            except (NotImplementedError, AssertionError):
                raise
            except Exception as err:
                errors[index] = f"{type(err).__name__}: {err}"
        unnamed = sorted(kind for kind in kinds if not any(f"broken_{kind}.jpg" in e for e in errors.values()))
        assert not unnamed, (
            f"reading every item of {what} over {folder}: {len(errors)} of {len(dataset)} reads raised an error"
            + (f" (the first: {next(iter(errors.values()))})" if errors else "")
            + f", and none names {', '.join(f'broken_{kind}.jpg' for kind in unnamed)}.")
    gc.collect()


# ---- step 2: the loop waits for data ------------------------------------------------------------

ITEM_READS = 3  # reads of one item timed for the message: the median is shown


def an_item_weighs_more_than_its_pixels(ex: ModuleType) -> None:
    import torch

    shapes_folder = require(ex, "ShapesFolder")
    pixel_bytes = 3 * IMAGE_SIZE * IMAGE_SIZE
    val_dir = dataset_dir() / "val"
    for train in (False, True):
        what = f"ShapesFolder(val folder, train={train})"
        if train:  # the contract takes a Path or a str: the second read gets the folder as a relative str
            dataset = in_promised_type(lambda split: within(30, what, lambda: shapes_folder(split, train)),
                                       relative_str(val_dir), val_dir, f"ShapesFolder({relative_str(val_dir)!r}, "
                                       "train=True), the folder given as a str,", "with the folder as a Path",
                                       "The contract takes split_dir as a Path or a str.")
        else:
            dataset = within(30, what, lambda: shapes_folder(val_dir, train))
        image, _ = _item(dataset, 0, what)
        if not _is_uint8_item(image):
            reads = []
            for _ in range(ITEM_READS):
                began = time.perf_counter()
                _item(dataset, 0, what)
                reads.append(time.perf_counter() - began)
            raise AssertionError(
                f"{what}[0] is {_described(image)}: {_as_array(image).nbytes:,} bytes, for a {IMAGE_SIZE}x{IMAGE_SIZE} "
                f"RGB picture whose 8-bit pixels take {pixel_bytes:,}; reading it took "
                f"{1000 * float(np.median(reads)):.0f} ms (the median of {ITEM_READS} reads).")
    generator = torch.Generator().manual_seed(SEED)
    batch = torch.randint(0, 256, (5, 3, IMAGE_SIZE, IMAGE_SIZE), dtype=torch.uint8, generator=generator)
    expected = (batch.float() / 255 - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    to_model_input = require(ex, "to_model_input")
    call = f"to_model_input(a uint8 batch of shape {tuple(batch.shape)}, 'cpu')"
    # The contract takes the device as a torch.device or a str: the str here, the torch.device in every other check.
    made = in_promised_type(lambda device: to_model_input(batch.clone(), device), "cpu", torch.device("cpu"),
                            f"{call}, the device given as a str,", "with torch.device('cpu')",
                            "The contract takes the device as a torch.device or a str.")
    assert isinstance(made, torch.Tensor) and made.dtype == torch.float32 and made.shape == batch.shape, (
        f"{call} returned {_described(made)}, where the model takes float32 of the batch's shape.")
    worst = float((made - expected).abs().max())
    assert worst <= NORMALISE_TOLERANCE, (
        f"{call} differs from (images / 255 - MEAN) / STD, per channel, by up to {worst:.4g} (rounding accounts for "
        f"{NORMALISE_TOLERANCE}).")
    data = dataset_dir()  # the contract takes a Path or a str: a relative str here, a Path in every other check
    train_loader, _ = in_promised_type(lambda folder: _loaders(ex, folder, num_workers=0), relative_str(data), data,
                                       f"make_loaders({relative_str(data)!r}, cpu, num_workers=0), the data folder "
                                       "given as a str,", "with the folder as a Path",
                                       "The contract takes data_dir as a Path or a str.")
    images, labels = within(60, "the first batch of make_loaders(data, cpu, num_workers=0)",
                            lambda: next(iter(train_loader)))
    assert images.dtype == torch.uint8 and labels.dtype == torch.int64, (
        f"the first batch of the train loader (make_loaders(data, cpu, num_workers=0)) holds {images.dtype} images "
        f"({images.element_size() * images.nelement():,} bytes) and {labels.dtype} labels.")


# ---- step 3: one core busy ----------------------------------------------------------------------

def _processes_below() -> dict[int, Any]:
    """The processes below this one (children, and theirs), by pid."""
    import psutil

    return {process.pid: process for process in psutil.Process().children(recursive=True)}


def _workers_among(new: dict[int, Any]) -> set[int]:
    """The worker processes among processes started since a point: those that start none of their own (a forkserver's
    server is the parent of the workers it forks, which carry its command line, so grader.support.child_processes
    would not tell them apart) and are not multiprocessing's resource tracker."""
    import psutil

    parents, services = set(), set()
    for pid, process in new.items():
        try:
            parents.add(process.ppid())
            if "resource_tracker" in " ".join(process.cmdline()):
                services.add(pid)
        except psutil.Error:
            services.add(pid)  # gone already: not a worker of this epoch
    return set(new) - parents - services


def _worker_pids_per_epoch(loader: Any, epochs: int = 2) -> list[frozenset[int]]:
    """The worker processes each epoch of `loader` ran with (among those started since its first epoch began)."""
    before = set(_processes_below())
    seen = []
    for _ in range(epochs):
        pids: set[int] = set()
        for _ in loader:
            pids |= _workers_among({pid: p for pid, p in _processes_below().items() if pid not in before})
        seen.append(frozenset(pids))
    return seen


def worker_processes_over_two_epochs(ex: ModuleType) -> None:
    cores = usable_cores()
    setting = "make_loaders(data_dir, cpu) (no worker count given)"
    with _data_root() as root:
        _small_copy(root)

        def two_epochs_each() -> dict[str, list[frozenset[int]]]:
            train_loader, val_loader = _loaders(ex, root)
            return {"train": _worker_pids_per_epoch(train_loader), "val": _worker_pids_per_epoch(val_loader)}

        with no_leaks(setting):
            try:
                seen = within(120, f"two epochs of each loader of {setting}", two_epochs_each)
            finally:
                gc.collect()
        workers = len(seen["train"][0])
        assert workers == cores or cores == 1 and workers == 0, (
            f"an epoch of the train loader of {setting} ran with "
            + (f"no worker process beside the training process, on a machine with {cores} usable cores: one process "
               "decoded every image and ran every step." if not workers else
               f"{workers} worker process{'es' if workers > 1 else ''} beside the training process, "
               f"{abs(cores - workers)} {'fewer' if workers < cores else 'more'} than the machine's {cores} usable "
               "cores."))
        for name, (first, second) in seen.items():
            assert second == first, (
                f"epoch 2 of the {name} loader of {setting} ran in {len(second - first)} new worker processes (pids "
                f"{', '.join(map(str, sorted(second)))}; epoch 1's were {', '.join(map(str, sorted(first))) or 'none'}"
                f"): before its first batch, every epoch waited for {len(second)} processes to start, each importing "
                "its libraries and receiving its own copy of the dataset.")
        one, _ = _loaders(ex, root, num_workers=1)
        assert getattr(one, "num_workers", None) == 1, (
            f"make_loaders(data_dir, cpu, num_workers=1) built a train loader with "
            f"{getattr(one, 'num_workers', None)} workers.")


# ---- step 4: a split elsewhere ------------------------------------------------------------------

def labels_change_when_the_split_moves(ex: ModuleType) -> None:
    shapes_folder = require(ex, "ShapesFolder")
    with _data_root(deeper=2) as root:
        taken: Counter[int] = Counter()
        chosen = []
        for sample in list_samples(dataset_dir() / "val"):  # 1, 2 or 3 files per class: a wrong label shows in the counts
            if taken[sample.label] < 1 + sample.label % 3:
                taken[sample.label] += 1
                chosen.append(sample)
        _link_samples(chosen, root / "train")
        classes = sorted(p.name for p in (root / "train").iterdir())
        held = {name: len(list((root / "train" / name).glob("*.jpg"))) for name in classes}
        what = "ShapesFolder over a split two folders deeper than the data folder"
        try:
            dataset = within(30, what, lambda: shapes_folder(root / "train", False))
            targets = [int(t) for t in dataset.targets]
            labels = [int(_item(dataset, i, what)[1]) for i in range(len(dataset))]
        except (NotImplementedError, AssertionError):
            raise
        except Exception as err:
            raise AssertionError(f"{what} raised {type(err).__name__}: {err}.") from None
    counted = Counter(targets)
    got = {name: counted.get(index, 0) for index, name in enumerate(classes)}
    never = [name for name, count in got.items() if count == 0]
    assert got == held and not set(counted) - set(range(len(classes))), (
        f"{what}: files per class folder {held}; labels per class {got}"
        + (f", and labels {sorted(set(counted) - set(range(len(classes))))} name no folder" if set(counted) - set(
            range(len(classes))) else "")
        + (f"; {', '.join(repr(name) for name in never)} never appear{'s' if len(never) == 1 else ''} as a label"
           if never else "") + ".")
    moved = [i for i, (label, target) in enumerate(zip(labels, targets)) if label != target]
    assert not moved, (
        f"{what}: items {moved[:10]} carry labels other than their entries in `targets` ({len(moved)} of "
        f"{len(labels)} items).")


# ---- step 5: the same crop again ----------------------------------------------------------------

def a_train_item_repeats_its_crop(ex: ModuleType) -> None:
    shapes_folder = require(ex, "ShapesFolder")
    what = "ShapesFolder(train folder, train=True)"
    dataset = within(30, what, lambda: shapes_folder(dataset_dir() / "train", True))
    for index in range(3):
        reads = [_as_array(_item(dataset, index, what)[0]) for _ in range(READS_PER_ITEM)]
        if all(_same_up_to_flip(reads[0], read) for read in reads[1:]):
            flipped = sum(not np.array_equal(reads[0], read) for read in reads[1:])
            raise AssertionError(
                f"{what}[{index}] read {READS_PER_ITEM} times gave the same crop every time"
                + (f" ({flipped} of the later reads its mirror image)." if flipped else ", pixel for pixel."))


def workers_and_epochs_repeat_crops(ex: ModuleType) -> None:
    image = list_samples(dataset_dir() / "train")[0].path
    copies = 2 * BATCH_SIZE
    with _data_root() as root:
        for k in range(copies):  # two batches of copies of ONE image: only the augmentation tells them apart
            _link(image, root / "train" / ("a_class", "b_class")[k % 2] / f"copy_{k:03d}.jpg")
        _link_samples(_spread("val", 1)[:2], root / "val")
        setting = f"make_loaders(a folder of {copies} copies of one image, cpu, num_workers=2)"

        def two_epochs() -> list[list[Any]]:
            train_loader, _ = _loaders(ex, root, seed=SEED, num_workers=2)
            return [[_as_array(images) for images, _ in train_loader] for _ in range(2)]

        with no_leaks(setting):
            try:
                first, second = within(120, setting, two_epochs)
            finally:
                gc.collect()
    assert len(first) == 2 and len(second) == 2, (
        f"{setting}: the train loader gave {len(first)} and {len(second)} batches in two epochs, where {copies} "
        f"images in batches of {BATCH_SIZE} make 2.")
    assert not np.array_equal(first[0], first[1]), (
        f"{setting}: worker 0's batch holds the same {BATCH_SIZE} crops and flips as worker 1's, image for image.")
    assert not np.array_equal(first[0], second[0]), (
        f"{setting}: epoch 2 handed out the same crops and flips as epoch 1, batch for batch.")


# ---- step 6: one order every epoch --------------------------------------------------------------

def _sampled_order(loader: Any) -> list[int]:
    """One epoch of the indices the loader's batch sampler (or sampler) hands out, in order."""
    sampler = getattr(loader, "batch_sampler", None) or getattr(loader, "sampler", None)
    assert sampler is not None, (
        f"the train loader ({type(loader).__name__}) has no sampler or batch_sampler to read its order from.")
    return [int(i) for batch in sampler for i in (batch if isinstance(batch, list) else [batch])]


def epochs_repeat_one_order(ex: ModuleType) -> None:
    from loaderlab.order import adjacent_pair_share

    train_loader, _ = _loaders(ex, dataset_dir(), seed=SEED)
    count = len(train_loader.dataset)
    epochs = [_sampled_order(train_loader) for _ in range(2)]
    for number, order in enumerate(epochs, 1):
        repeated = sum(n - 1 for n in Counter(order).values() if n > 1)
        missing = count - len(set(order) & set(range(count)))
        assert sorted(order) == list(range(count)), (
            f"epoch {number} of the train loader handed out {len(order)} indices of its {count} samples: "
            f"{repeated} repeated, {missing} never.")
    first, second = epochs
    assert first != second, (
        f"2 epochs of the train loader (make_loaders(data, cpu, seed={SEED})): epoch 2 visited the {count} samples "
        "in the same order as epoch 1" + (": the dataset's own index order, 0, 1, 2 and on" if first == sorted(first)
                                          else "") + ".")
    share = adjacent_pair_share([first.index(i) for i in second])
    assert share <= MAX_KEPT_NEIGHBOURS, (
        f"2 epochs of the train loader: {share:.0%} of consecutive samples of epoch 2 were neighbours in epoch 1 "
        f"(a new order keeps about {2 / count:.0%}).")

    def first_epoch(seed: int) -> list[int]:
        return _sampled_order(_loaders(ex, dataset_dir(), seed=seed)[0])

    assert first_epoch(SEED) == first, (
        f"two train loaders made with seed={SEED} visited the samples in different orders in their first epochs.")
    assert first_epoch(SEED + 1) != first, (
        f"train loaders made with seed={SEED} and seed={SEED + 1} visited the samples in the same order in their "
        "first epochs.")


# ---- step 7: val accuracy that moves ------------------------------------------------------------

PROBE_VAL_PER_CLASS = 3  # val images per class the two evaluations read (30 on any profile)


def _probe_model() -> Any:
    """A fixed model whose predictions depend on every pixel: a seeded random linear map of the image (input cast to
    float, so it reads whatever the val loader hands over)."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    weights = torch.randn(3 * IMAGE_SIZE * IMAGE_SIZE, CLASSES, generator=generator)
    return lambda images: images.reshape(len(images), -1).float() @ weights


def _predictions(loader: Any, model: Any) -> tuple[list[int], list[int]]:
    """(predictions, labels) of the model over one pass of the loader."""
    predicted, labels = [], []
    for images, batch_labels in loader:
        predicted += [int(p) for p in model(images).argmax(dim=1)]
        labels += [int(label) for label in batch_labels]
    return predicted, labels


def val_accuracy_moves_between_evaluations(ex: ModuleType) -> None:
    model = _probe_model()
    with _data_root() as root:
        _small_copy(root, val_per_class=PROBE_VAL_PER_CLASS)
        setting = (f"one fixed model (a seeded random linear map of the pixels) over two passes of the val loader "
                   f"(make_loaders(a folder of {PROBE_VAL_PER_CLASS} val images per class, cpu, num_workers=0))")

        def two_passes() -> list[tuple[list[int], list[int]]]:
            _, val_loader = _loaders(ex, root, num_workers=0)
            return [_predictions(val_loader, model) for _ in range(2)]

        (first, labels), (second, _) = within(120, setting, two_passes)
    changed = sum(a != b for a, b in zip(first, second))
    accuracies = [sum(p == label for p, label in zip(predicted, labels)) / max(1, len(labels))
                  for predicted in (first, second)]
    assert not changed, (
        f"{setting}: val accuracy {accuracies[0]:.1%} then {accuracies[1]:.1%}; {changed} of its {len(labels)} "
        "predictions changed between the passes.")
    shapes_folder = require(ex, "ShapesFolder")
    what = "ShapesFolder(val folder, train=False)"
    every = list_samples(dataset_dir() / "val")
    # every val image of ci; an even spread of larger profiles, with a file of every kind of file among them
    samples = spread_samples(every, VAL_MOST, file_encodings(dataset_dir(), "val"))
    positions = [every.index(s) for s in samples]
    dataset = within(30, what, lambda: shapes_folder(dataset_dir() / "val", False))
    passes = [[_as_array(_item(dataset, i, what)[0]) for i in positions[:count]]
              for count in (len(positions), VAL_TWICE)]
    differed = [i for i, (a, b) in enumerate(zip(*passes)) if not np.array_equal(a, b)]
    assert not differed, f"{what}: items {differed} differed between two reads, of the first {VAL_TWICE} read twice."
    first_item = passes[0][0]
    assert first_item.dtype == np.uint8 and first_item.shape == (3, IMAGE_SIZE, IMAGE_SIZE), (
        f"{what}[0] is {first_item.dtype} of shape {first_item.shape}: compared with the reference centre crops "
        f"only as uint8 (3, {IMAGE_SIZE}, {IMAGE_SIZE}) items (step 2 measures the items).")
    differences = [min(mean_abs_difference(image, reference) for reference in reference_centre_crops(s.path))
                   for image, s in zip(passes[0], samples)]
    assert_pixels_within(differences, samples, f"{what}, over {len(samples)} val images in file order",
                         VAL_WORST_TOLERANCE, VAL_MEAN_TOLERANCE,
                         reference=f"the centre {IMAGE_SIZE}x{IMAGE_SIZE} of each image resized to a short side of "
                                   f"{RESIZE}")
    _, val_loader = _loaders(ex, dataset_dir(), num_workers=0)
    labels = within(60, "an epoch of the val loader", lambda: [int(label) for _, b in val_loader for label in b])
    in_file_order = [s.label for s in list_samples(dataset_dir() / "val")]
    moved = next((i for i, (a, b) in enumerate(zip(labels, in_file_order)) if a != b), min(len(labels),
                                                                                         len(in_file_order)))
    assert labels == in_file_order, (
        f"an epoch of the val loader (make_loaders(data, cpu, num_workers=0)) gave {len(labels)} labels that leave "
        f"the val files' labels in file order ({len(in_file_order)}) at position {moved}.")


# ---- step 8: the copy to the device -------------------------------------------------------------

def _pinning_observed(loader: Any, name: str, call: str, cuda: bool) -> str | None:
    """What this machine shows of a loader's pinning that is wrong for its device, or None where it is right.

    On a CUDA machine a batch's `is_pinned()` says it; elsewhere the loader's setting does, and where that is wrong
    for the CPU, torch's own warning is what a practitioner sees (a machine with no accelerator)."""
    import warnings

    import torch

    if torch.cuda.is_available():
        images = within(60, f"the first batch of the {name} loader of {call}", lambda: next(iter(loader)))[0]
        if images.is_pinned() == cuda:
            return None
        if cuda:
            return (f"the {name} loader of {call} hands over its batches in pageable memory (a batch's is_pinned() "
                    "is False): their copy to the GPU cannot overlap the step.")
        return (f"the {name} loader of {call} (training on the CPU, on a machine with a CUDA GPU) hands over its "
                "batches in page-locked memory (a batch's is_pinned() is True), though they never leave the CPU.")
    if bool(getattr(loader, "pin_memory", False)) == cuda:
        return None
    if cuda:
        return (f"the {name} loader of {call} is not set to hand over page-locked batches (read from its settings, "
                "as this machine has no CUDA GPU): on a CUDA machine its batches would arrive in pageable memory, "
                "and their copy to the GPU could not overlap the step.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iter(loader)  # num_workers=0: the iterator starts nothing; torch warns as it is made
    warned = [str(w.message) for w in caught if "pin" in str(w.message)]
    if warned:
        return f"making an iterator over the {name} loader of {call} (training on the CPU), torch warned: {warned[0]!r}"
    return (f"the {name} loader of {call} (training on the CPU) is set to hand over page-locked batches (read from "
            "its settings: this machine's accelerator shows nothing of it; without one, torch warns as each epoch "
            "begins, and on a CUDA machine every batch arrives page-locked).")


def batches_pinned_for_the_wrong_device(ex: ModuleType) -> None:
    import torch

    with _data_root() as root:
        _small_copy(root)
        # The contract takes a torch.device or a str: both, with and without a device index. num_workers=0: a batch
        # is pinned (or not) in this process, and nothing is started.
        for device in (torch.device("cpu"), "cpu", torch.device("cuda"), "cuda:0"):
            call = f"make_loaders(data_dir, {device!r}, num_workers=0)"
            made = require(ex, "make_loaders")(root, device, num_workers=0)
            assert isinstance(made, tuple) and len(made) == 2, (
                f"{call} returned {_described(made)}, not a (train_loader, val_loader) pair")
            for name, loader in zip(("train", "val"), made):
                observed = _pinning_observed(loader, name, call, torch.device(device).type == "cuda")
                assert observed is None, observed


# ---- step 9: what the figures count -------------------------------------------------------------

# Batches of 4, 4 and 3 whose labels make a mean of per-batch accuracies (2/3) differ from the accuracy (7/11).
LOOP_BATCHES = ((4, 0), (4, 1), (3, 0))  # (size, every label of the batch)


def _loop_batches() -> list[tuple[Any, Any]]:
    import torch

    generator = torch.Generator().manual_seed(SEED)
    return [(torch.randint(0, 256, (size, 3, IMAGE_SIZE, IMAGE_SIZE), dtype=torch.uint8, generator=generator),
             torch.full((size,), label, dtype=torch.int64)) for size, label in LOOP_BATCHES]


def _says_class_zero() -> Any:
    """A model that predicts class 0 for every input, whatever the input, with one parameter an optimiser can hold."""
    import torch

    class SaysZero(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bias = torch.nn.Parameter(torch.zeros(CLASSES))

        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            logits = torch.zeros(len(inputs), CLASSES) + self.bias
            logits[:, 0] += 1.0
            return logits

    return SaysZero()


def a_short_last_batch_miscounted(ex: ModuleType) -> None:
    import torch

    batches = _loop_batches()
    sizes = [size for size, _ in LOOP_BATCHES]
    correct = sum(size for size, label in LOOP_BATCHES if label == 0)
    total = sum(sizes)
    model = _says_class_zero()
    accuracy = within(30, "evaluate(model, loader, cpu)", lambda: require(ex, "evaluate")(model, batches, "cpu"))
    per_batch = [1.0 if label == 0 else 0.0 for _, label in LOOP_BATCHES]
    assert isinstance(accuracy, float | int) and abs(accuracy - correct / total) < 1e-9, (
        f"evaluate over batches of {sizes} images, with a model right on {correct} of the {total} images, returned "
        f"{accuracy!r}"
        + (f", the mean of the batches' accuracies {per_batch}" if isinstance(accuracy, float | int)
           and abs(accuracy - sum(per_batch) / len(per_batch)) < 1e-9 else "")
        + f"; {correct} of {total} is {correct / total:.4f}.")
    import loaderlab.training

    seen: list[int] = []

    def counting_step(model: Any, optimizer: Any, inputs: Any, labels: Any) -> Any:
        seen.append(len(labels))
        return torch.zeros(())

    train_one_epoch = require(ex, "train_one_epoch")
    # The fixed step replaced by one that counts wherever train_one_epoch can find it: the globals of the module that
    # defines it (the script, or one it imports it from), and loaderlab.training itself.
    namespaces = {id(n): n for n in (vars(ex), getattr(train_one_epoch, "__globals__", {}), vars(loaderlab.training))
                  if "train_step" in n}.values()
    originals = [(namespace, namespace["train_step"]) for namespace in namespaces]
    for namespace, _ in originals:
        namespace["train_step"] = counting_step
    try:
        within(30, "train_one_epoch(model, optimizer, loader, cpu)", lambda: train_one_epoch(
            model, torch.optim.SGD(model.parameters(), lr=0.1), batches, "cpu"))
    finally:
        for namespace, original in originals:
            namespace["train_step"] = original
    assert seen == sizes, (
        f"train_one_epoch over batches of {sizes} images called train_step on batches of {seen}: "
        f"{sum(seen)} of the {total} images trained on.")


class _SlowStart:
    """Given batches, the first late (a worker starting), the rest at once.
    Records when each batch was asked for, so the steady rate can be measured from outside."""

    def __init__(self, batches: list[Any]) -> None:
        self.batches = batches
        self.asked: list[float] = []
        self.ended = 0.0

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[Any]:
        for position, batch in enumerate(self.batches):
            self.asked.append(time.perf_counter())
            if position == 0:
                time.sleep(SLOW_FIRST_BATCH_S)
            yield batch
        self.ended = time.perf_counter()


def epoch_timer_counts_the_start_up(ex: ModuleType) -> None:
    import torch

    # One batch as the script's own train loader makes it, repeated: time_training meets the input it expects.
    train_loader, _ = _loaders(ex, dataset_dir(), num_workers=0)
    images, labels = within(60, "the first batch of make_loaders(data, cpu, num_workers=0)",
                            lambda: next(iter(train_loader)))
    time_training = require(ex, "time_training")
    size = len(labels)
    for warmup in WARMUPS_FOR_TIMING:
        batches = [(images.clone(), labels.clone()) for _ in range(TIMING_BATCHES)]
        seed_everything(SEED)
        model = SmallCNN(10)
        optimizer = make_optimizer(model)
        loader = _SlowStart(batches)
        reported = float(within(120, f"time_training(warmup_batches={warmup}) on a loader whose first batch is slow",
                                lambda: time_training(model, optimizer, loader, torch.device("cpu"),
                                                      warmup_batches=warmup)))
        window = loader.ended - loader.asked[warmup]   # from asking for the first timed batch to the pass's end
        whole = loader.ended - loader.asked[0]         # the whole pass, the slow first batch included
        timed = (TIMING_BATCHES - warmup) * size
        steady = timed / window                        # the steady state, measured from outside
        counted = reported * window                    # the images its rate implies over that window
        print(f"time_training(warmup_batches={warmup}) reported {reported:.0f} images/s: {counted:.1f} images over "
              f"the {window:.3f} s after the warm-up, which held {timed}")
        if abs(counted - timed) <= size / 2:
            continue
        if abs(reported * whole - TIMING_BATCHES * size) <= size / 2:
            seen = (f"all {TIMING_BATCHES * size} images over the whole pass: {whole:.2f} s from asking for the first "
                    f"batch, {whole - window:.2f} s of them before the warm-up ended")
        elif abs(counted - TIMING_BATCHES * size) <= size / 2:
            seen = (f"all {TIMING_BATCHES * size} images, the {warmup * size} of the warm-up included, over the "
                    f"{window:.2f} s after the warm-up")
        else:
            seen = f"{counted:.0f} images over the {window:.2f} s after the warm-up, which held {timed}"
        raise AssertionError(
            f"time_training(..., warmup_batches={warmup}) over {TIMING_BATCHES} batches of {size} images, the first "
            f"{SLOW_FIRST_BATCH_S} s late (a worker starting), reported {reported:.0f} images/s; the steady state "
            f"after the warm-up, measured from outside, was {steady:.0f} images/s ({timed} images in {window:.2f} s). "
            f"The reported figure matches {seen}.")


# ---- step 10: time to accuracy (timed and trained) --------------------------------------------------

def _training_epochs(module: ModuleType, loader: Any) -> Any:
    """An iterable for `compare`: one training pass (the fixed step on the module's input) over the loader."""
    import torch

    seed_everything(SEED)
    model = SmallCNN(10)
    optimizer = make_optimizer(model)
    to_model_input = module.to_model_input
    device = torch.device("cpu")

    def one_pass() -> Iterator[Any]:
        for images, labels in loader:
            train_step(model, optimizer, to_model_input(images, device), labels)
            yield labels

    return one_pass


def beats_the_original_throughput(ex: ModuleType) -> Comparison:
    from loaderlab import original_training_script as original

    loaders: dict[str, Any] = {}

    def run() -> Comparison:
        loaders["original"] = original.make_loaders(dataset_dir(), "cpu")[0]
        loaders["yours"] = _loaders(ex, dataset_dir())[0]
        print(f"original: num_workers={loaders['original'].num_workers}; "
              f"yours: num_workers={loaders['yours'].num_workers} on {usable_cores()} usable cores")
        return compare(_training_epochs(original, loaders["original"]), _training_epochs(ex, loaders["yours"]),
                       rounds=3, count=count_batch, warmup_items=BATCH_SIZE, max_items=TIMED_BATCHES * BATCH_SIZE,
                       unit="images", name="your training loop", baseline_name="the original script",
                       target_for_free_cores=lambda free: min(ORIGINAL_TARGET_CAP,
                                                                         ORIGINAL_TARGET_PER_FREE_CORE * free))

    with no_leaks("timing training against the original"):
        try:
            return within(240, "timing training against the original script", run)
        finally:
            loaders.clear()
            gc.collect()


def data_stall_under_bound(ex: ModuleType) -> Measured:
    import torch

    device = torch.device("cpu")
    meter = StallMeter(skip_batches=1)

    def run() -> None:
        train_loader, _ = _loaders(ex, dataset_dir(), seed=SEED)
        seed_everything(SEED)
        model = SmallCNN(len(train_loader.dataset.classes))
        optimizer = make_optimizer(model)
        train_one_epoch = require(ex, "train_one_epoch")
        train_one_epoch(model, optimizer, _first(train_loader, TIMED_BATCHES + 1), device)  # starts the workers
        train_one_epoch(model, optimizer, meter.wrap(_first(train_loader, 2 * TIMED_BATCHES + 1)), device)

    with no_leaks("a training epoch measured by StallMeter"):
        try:
            within(180, "training measured by StallMeter", run)
        finally:
            gc.collect()
    print(meter.summary())
    return Measured(
        f"data stall, {meter.batches} batches (a short run)", meter.stall_fraction, MAX_STALL_FRACTION, at_most=True,
        failure=f"the training loop waited for data {meter.stall_fraction:.0%} of its time ({meter.summary()}; "
        f"allowed {MAX_STALL_FRACTION:.0%}), measured from outside after a first pass of {TIMED_BATCHES + 1} batches.")


class _first:
    """The first `count` batches of a loader (the loader's own length and attributes kept)."""

    def __init__(self, loader: Any, count: int) -> None:
        self.loader, self.count = loader, count

    def __iter__(self) -> Iterator[Any]:
        for position, batch in enumerate(self.loader):
            if position == self.count:
                return
            yield batch

    def __len__(self) -> int:
        return min(self.count, len(self.loader))


def accuracy_after_the_epoch_budget(ex: ModuleType) -> Measured | None:
    from grader.capstone import describe, train_measured

    profile = active_profile()
    level = MIN_ACCURACY.get(profile)
    if level is None:
        print(f"no accuracy target is calibrated for the '{profile}' profile yet: graded on 'ci' "
              "(LOADERLAB_PROFILE=ci); `make capstone` trains the full budget here and prints the time to accuracy.")
        return
    epochs = epochs_for(profile)
    with no_leaks("training for the epoch budget"):
        run = within(900, f"training for the '{profile}' budget of {epochs} epochs",
                     lambda: train_measured(ex, dataset_dir(), epochs, "cpu", SEED,
                                            progress=lambda record: print(describe(record), flush=True)))
    last = [record.val_accuracy for record in run.records[-ACCURACY_EPOCHS:]]
    accuracy = sum(last) / len(last) if last else 0.0
    reached = time_to_accuracy(run, level)
    short = " (ci's short run)" if profile == "ci" else ""
    return Measured(
        f"val accuracy, {epochs} epochs{short}", accuracy, level, at_most=False,
        note=f"a floor, which the shipped script clears too; mean of the last {len(last)}; time to {level:.0%}: "
             + (f"{reached:.1f} s" if reached is not None else "not reached"),
        failure=f"after the '{profile}' budget of {epochs} epochs (the fixed model, optimiser and seed), the val "
        f"accuracy your evaluate reported is {accuracy:.1%} over the last {len(last)} epochs, under the floor of "
        f"{level:.0%}; epoch by epoch: {', '.join(f'{record.val_accuracy:.0%}' for record in run.records)} (chance "
        f"is {1 / CLASSES:.0%}).")
