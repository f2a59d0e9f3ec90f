"""Finding samples in an ImageFolder tree, and the reference decode that grades compare to."""

from __future__ import annotations

import csv
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
RESIZE = 256
CROP = 224
# How far a loader's centre crop may be from `reference_crop`, in 0..255 levels of plain |difference|: the course's
# pixel contract (exercises 04 and 10 and the league's gate enforce it; exercise 01's checks, which compare each
# crop at its best alignment, have looser aligned bounds of their own).
MEAN_TOLERANCE = 2.0   # the mean over the images of each image's mean |difference|
WORST_TOLERANCE = 6.0  # any one image's mean |difference|


class Sample(NamedTuple):
    path: Path
    label: int


class CorruptImage(ValueError):
    """A file that does not decode as an image; says which file and why."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


def class_names(split_dir: Path | str) -> list[str]:
    """Sorted class folder names, as torchvision's ImageFolder orders them."""
    split_dir = Path(split_dir)
    if not split_dir.is_dir():
        raise FileNotFoundError(
            f"{split_dir} is not a folder. Expected <root>/<split>/<class>/*.jpg; "
            "generate the data with `make data` or check the path."
        )
    names = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
    if not names:
        raise FileNotFoundError(f"{split_dir} has no class folders (expected {split_dir}/<class>/*.jpg).")
    return names


def list_samples(split_dir: Path | str) -> list[Sample]:
    """Every image under split_dir/<class>/, sorted by class then file name, with its label."""
    split_dir = Path(split_dir)
    samples = []
    for label, name in enumerate(class_names(split_dir)):
        files = sorted(p for p in (split_dir / name).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise FileNotFoundError(
                f"class folder {split_dir / name} holds no images; remove it or add images "
                "(an empty class would shift every label after it)."
            )
        samples.extend(Sample(path, label) for path in files)
    return samples


def link_subset(samples: Sequence[Sample], dest: Path | str) -> Path:
    """An ImageFolder tree at `dest` holding just `samples`, as links to the files (copies where links fail).

    Each file goes under its own class folder's name, so a loader built on `dest` sees a small
    dataset with the same layout. Labels are numbered anew by the class folders present: keep at
    least one sample of every class for them to equal the original labels.
    """
    dest = Path(dest)
    for path, _ in samples:
        target = dest / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.symlink_to(path.resolve())
        except OSError:  # no symlinks here (Windows without developer mode): copy instead
            shutil.copyfile(path, target)
    return dest


@contextmanager
def linked_split(samples: Sequence[Sample], extra: dict[str, Path] | None = None) -> Iterator[tuple[Path, list[Sample]]]:
    """A temporary ImageFolder tree `<tmp>/train/<class>/<file>` of links to `samples`, removed afterwards.

    `extra` adds links by relative name ("<class>/<file>": target). Yields the root and its
    samples in `list_samples` order: for loaders that take a folder, run on a few files.
    """
    with tempfile.TemporaryDirectory(prefix="loaderlab-split-") as tmp:
        root = link_subset(samples, Path(tmp) / "train")
        for name, target in (extra or {}).items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).symlink_to(target)
        yield root, list_samples(root)


# What Pillow raises for a file that is not a decodable image (truncated, empty, not a JPEG, ...).
DECODE_ERRORS = (OSError, SyntaxError, ValueError, Image.DecompressionBombError)


def decode_failure_reason(path: Path | str, error: BaseException) -> str:
    """A short, readable reason why `path` did not decode."""
    path = Path(path)
    if path.exists() and path.stat().st_size == 0:
        return "empty file (0 bytes)"
    return f"{type(error).__name__}: {error}"


def decode_rgb(path: Path | str) -> Image.Image:
    """Open and fully decode an image as RGB, turning every failure into CorruptImage."""
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except FileNotFoundError:
        raise
    except DECODE_ERRORS as err:
        raise CorruptImage(path, decode_failure_reason(path, err)) from err


def resize_center_crop(image: Image.Image, resize: int = RESIZE, crop: int = CROP) -> Image.Image:
    """Resize the short side to `resize` (bilinear, antialiased), then take the centre `crop`.

    Matches torchvision's Resize(256) + CenterCrop(224) on PIL images.
    """
    width, height = image.size
    if width <= height:
        new_size = (resize, int(resize * height / width))
    else:
        new_size = (int(resize * width / height), resize)
    image = image.resize(new_size, Image.BILINEAR)
    left = int(round((new_size[0] - crop) / 2.0))
    top = int(round((new_size[1] - crop) / 2.0))
    return image.crop((left, top, left + crop, top + crop))


def reference_crop(path: Path | str, resize: int = RESIZE, crop: int = CROP) -> np.ndarray:
    """The reference (crop, crop, 3) uint8 centre crop that loaders are checked against."""
    return np.asarray(resize_center_crop(decode_rgb(path), resize, crop), dtype=np.uint8)


def short_side_size(width: int, height: int, resize: int = RESIZE) -> tuple[int, int]:
    """(width, height) after scaling the short side to `resize`, as `resize_center_crop` does."""
    return (resize, int(resize * height / width)) if width <= height else (int(resize * width / height), resize)


def crop_window(width: int, height: int) -> tuple[float, float, float, float]:
    """The part of a `width` x `height` image that `reference_crop` keeps, as (left, top, right, bottom) in its pixels.

    The 224 centre crop of the 256-short-side resize, mapped back onto the original image: a square of
    224/256 of the short side (fractional edges). Scale it by a decoded size over the original to use it
    on an image decoded smaller."""
    resized = short_side_size(width, height)
    sx, sy = width / resized[0], height / resized[1]
    left, top = round((resized[0] - CROP) / 2), round((resized[1] - CROP) / 2)
    return left * sx, top * sy, (left + CROP) * sx, (top + CROP) * sy


def draft_center_crop(path: Path | str) -> np.ndarray:
    """uint8 (224, 224, 3) centre crop: JPEG draft mode, then crop and resize in one call (notebook 01, section 3).

    Exercise 01's fast crop, as course infrastructure: the CPU baseline of exercise 10 and the league use it."""
    with Image.open(path) as image:
        width, height = image.size
        image.draft("RGB", short_side_size(width, height))  # decode at 1/2 or 1/4 scale where the image is large enough
        fx, fy = image.size[0] / width, image.size[1] / height
        left, top, right, bottom = crop_window(width, height)
        box = (left * fx, top * fy, right * fx, bottom * fy)
        return np.asarray(image.convert("RGB").resize((CROP, CROP), Image.BILINEAR, box=box))


def mean_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute pixel difference (0..255) between two uint8 images of one shape."""
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def broken_files(root: Path | str, split: str = "dirty") -> dict[Path, str]:
    """Files of `split` that data_gen planted as broken, with their kind, from manifest.csv."""
    root = Path(root)
    with (root / "manifest.csv").open(newline="") as handle:
        return {root / row["path"]: row["status"] for row in csv.DictReader(handle)
                if row["split"] == split and row["status"] != "ok"}
