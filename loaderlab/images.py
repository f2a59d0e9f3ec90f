"""Finding samples in an ImageFolder tree, and the reference decode that grades compare to.

The reference decode (`decode_rgb`, and so `reference_crop`) and the kinds of file it reads. The dataset mixes the
kinds of file a real collection holds (`data_gen.encodings`: baseline and progressive JPEGs, 4:2:0, 4:2:2 and 4:4:4,
grayscale, Adobe CMYK and YCCK, camera files with an EXIF orientation tag, a PNG under a `.jpg` name). The reference
is Pillow's `Image.open(path).convert("RGB")`, torchvision's ImageFolder loader, and does this with each:
- any file is decoded by its content, not its name: a PNG named `.jpg` is a PNG (ImageNet's training set holds one);
- the pixels are kept as stored: an EXIF orientation tag is NOT applied. So do torchvision's ImageFolder loader,
  `torchvision.io.decode_jpeg` and `decode_image` (`apply_exif_orientation=False` by default; the CUDA decoder has no
  such option), `tf.io.decode_jpeg` and `decode_image`, and simplejpeg; OpenCV's `imread` and `imdecode` rotate
  unless given `IMREAD_IGNORE_ORIENTATION` (opencv-python 5.0, measured). A loader that rotates trains on other
  pixels than every one of those pipelines (and than its own GPU path), and editors that rotate a file's pixels
  without clearing its tag make the tag no safer to follow;
- a grayscale file is replicated to three equal channels (mode "L" to "RGB");
- a CMYK or YCCK file (Adobe's inverted inks; libjpeg turns YCCK into CMYK) becomes RGB as Pillow converts it,
  r = (255 - c)(255 - k) / 255 with no colour profile. The other decoders in the lock use the same model and land
  within the course's tolerances of it (measured on generated files, mean |difference| over the whole image, at
  worst 2 levels on any pixel unless said): torchvision's decode_jpeg and decode_image identical, simplejpeg and
  OpenCV 0.50 (CMYK) and 0.57 (YCCK), TensorFlow 0.34 and 0.38 with dct_method="INTEGER_ACCURATE" (0.97 and 0.70,
  at worst 6, with its default IDCT, which is as far off on every JPEG). So no kind is exempt: every loader is held
  to the reference's crop on every file.

Every exercise stub that decodes images quotes `FILE_KINDS_CONTRACT` in its contract (tests/test_course_text.py).
"""

from __future__ import annotations

import csv
import math
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

from data_gen.encodings import ENCODINGS

FILE_KINDS_CONTRACT = (
    "Every kind of file the dataset mixes (`data_gen.encodings`: progressive, 4:2:2 and 4:4:4, grayscale, Adobe CMYK "
    "and YCCK, EXIF-tagged camera files, a PNG under a .jpg name) gives the reference's pixels (`loaderlab.images`: "
    "read by its content, kept as stored with no EXIF rotation, grayscale as three equal channels, CMYK as Pillow "
    "converts it).")
"""The one sentence of every image-decoding exercise's contract about the kinds of file; this module's docstring says
why the reference does what it does with each."""
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


def spread_samples(samples: Sequence[Sample], count: int, kinds: Mapping[Path, str] | None = None) -> list[Sample]:
    """`count` of `samples`, spread evenly over them, in their order. With `kinds` (each file's kind of file,
    `file_encodings`) and `count` at least the number of kinds of file (`data_gen.encodings`), a file of every kind
    `samples` holds is among them, each in place of the pick nearest to it that is of a kind picked more than once
    (and of its class, where one can be): on a large profile a kind can be 1 file in 1,000."""
    if count >= len(samples):
        return list(samples)
    picks = [int(i * len(samples) / count) for i in range(count)]
    if kinds is not None and count >= len(ENCODINGS):
        positions: dict[str | None, list[int]] = {}
        for position, sample in enumerate(samples):
            positions.setdefault(kinds.get(sample.path), []).append(position)
        for kind, where in positions.items():
            picked = [kinds.get(samples[p].path) for p in picks]
            if kind in picked:
                continue
            spare = [n for n in range(count) if picked.count(picked[n]) > 1]
            n, chosen = min(((n, f) for n in spare for f in where),
                            key=lambda nf: (samples[picks[nf[0]]].label != samples[nf[1]].label, abs(picks[nf[0]] - nf[1])))
            picks[n] = chosen
    return [samples[p] for p in sorted(picks)]


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
    """Open and fully decode an image as RGB, turning every failure into CorruptImage: the reference decode (this
    module's docstring says what it does with each kind of file, and why)."""
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


# Draft mode asks the decoder for at least this many times the resize's size, so that a DCT-scaled decode leaves the
# crop room above 224 px: a scaled IDCT is a truncated low-pass with block edges, not an antialiased resize, and just
# above the crop's size it leaves fine patterns aliased. Measured (2026-11-28, 2-core box) on the 2,696 workshop
# training images a 1/2 decode can reach: asking for exactly the resize's size left 2 of them past WORST_TOLERANCE
# (6.27 and 6.02 levels, grid patterns); with 1.15 the worst was 4.98.
DRAFT_HEADROOM = 1.15


def draft_size(width: int, height: int) -> tuple[int, int]:
    """The size to ask JPEG draft mode for: the short-side resize's size times DRAFT_HEADROOM."""
    resized = short_side_size(width, height)
    return math.ceil(resized[0] * DRAFT_HEADROOM), math.ceil(resized[1] * DRAFT_HEADROOM)


def draft_center_crop(path: Path | str) -> np.ndarray:
    """uint8 (224, 224, 3) centre crop: JPEG draft mode, then crop and resize in one call (notebook 01, section 3).

    Exercise 01's fast crop, as course infrastructure: the CPU baseline of exercise 10 and the league use it. Every kind
    of file goes the reference's way (draft mode only scales a JPEG's DCT, a CMYK file stays CMYK until convert, a
    PNG is opened by its content); measured on every train and val file of `ci` (generator 3), at worst 2.48 levels from
    `reference_crop` (every kind of file among them), and 4.98 on workshop's 2,696 images a 1/2 decode reaches."""
    with Image.open(path) as image:
        width, height = image.size
        image.draft("RGB", draft_size(width, height))  # 1/2, 1/4 or 1/8 scale where the image is large enough
        fx, fy = image.size[0] / width, image.size[1] / height
        left, top, right, bottom = crop_window(width, height)
        box = (left * fx, top * fy, right * fx, bottom * fy)
        return np.asarray(image.convert("RGB").resize((CROP, CROP), Image.BILINEAR, box=box))


def mean_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute pixel difference (0..255) between two uint8 images of one shape."""
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def file_encodings(root: Path | str, split: str = "train") -> dict[Path, str]:
    """Every file of `split` with the kind of file data_gen stored it as (`data_gen.encodings`), from manifest.csv."""
    root = Path(root)
    with (root / "manifest.csv").open(newline="") as handle:
        return {root / row["path"]: row["encoding"] for row in csv.DictReader(handle) if row["split"] == split}


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_START = b"\xff\xd8"
_EXIF_ORIENTATION = 0x0112
_PROGRESSIVE_FRAMES = {0xC2, 0xC6, 0xCA, 0xCE}  # SOF2, SOF6, SOF10, SOF14
_FRAMES = {0xC0, 0xC1, 0xC3, 0xC5, 0xC7, 0xC9, 0xCB, 0xCD, 0xCF} | _PROGRESSIVE_FRAMES


def _exif_orientation(exif: bytes) -> int:
    """The Orientation value of an APP1 Exif segment's first IFD (after "Exif\\0\\0"), 0 when it has none."""
    tiff = exif[6:]
    order = {b"II": "little", b"MM": "big"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return 0
    ifd = int.from_bytes(tiff[4:8], order)
    count = int.from_bytes(tiff[ifd:ifd + 2], order)
    for entry in range(ifd + 2, ifd + 2 + 12 * count, 12):
        if int.from_bytes(tiff[entry:entry + 2], order) == _EXIF_ORIENTATION:
            return int.from_bytes(tiff[entry + 8:entry + 10], order)
    return 0


def file_kind(data: bytes) -> str:
    """What kind of file `data` is, read from its header, in `data_gen.encodings`' words: "png-named-jpg" for a PNG,
    "exif-orientation N" for a JPEG tagged with orientation N (2-8), "adobe-cmyk", "adobe-ycck", "grayscale",
    "progressive-420", "baseline-420", "baseline-422", "baseline-444" (a progressive file of another subsampling reads
    "progressive-<subsampling>"), "not an image" for anything else. For messages that name what a file is, and for
    decoders that take only some kinds (nvJPEG, `loaderlab.device`)."""
    if data.startswith(PNG_SIGNATURE):
        return "png-named-jpg"
    if not data.startswith(JPEG_START):
        return "not an image"
    orientation, adobe_transform, at = 0, None, 2
    while at + 4 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
        segment = data[at + 4:at + 2 + length]
        if marker == 0xE1 and segment.startswith(b"Exif\0\0"):
            orientation = _exif_orientation(segment)
        elif marker == 0xEE and segment.startswith(b"Adobe") and len(segment) >= 12:
            adobe_transform = segment[11]
        elif marker in _FRAMES and len(segment) >= 9:
            components = segment[5]
            if components == 1:
                return "grayscale"
            if components == 4:
                return "adobe-ycck" if adobe_transform == 2 else "adobe-cmyk"
            if orientation > 1:
                return f"exif-orientation {orientation}"
            luma = segment[7]
            subsampling = {0x11: "444", 0x21: "422", 0x22: "420"}.get(luma, f"{luma >> 4}x{luma & 15}")
            return f"{'progressive' if marker in _PROGRESSIVE_FRAMES else 'baseline'}-{subsampling}"
        elif marker == 0xDA:
            break
        at += 2 + length
    return "not an image"


def named(path: Path | str) -> str:
    """A file's name and its kind (`file_kind`), for a message: "rings_000008.jpg (exif-orientation 2)"."""
    path = Path(path)
    try:
        kind = file_kind(path.read_bytes())
    except OSError:
        kind = "unreadable"
    return f"{path.name} ({kind})"


def far_kind(differences: list[float], samples: list[Sample], tolerance: float) -> str | None:
    """The kind of file (`file_kind`, orientation values aside) that the images more than `tolerance` levels off have in
    common, when they all share it, make up at least half of its files, and files of other kinds are all within it:
    a failure that follows the kind of file, not the image. Else None."""
    kinds = [file_kind(s.path.read_bytes()).split(" ")[0] for s in samples]
    far = [kind for kind, d in zip(kinds, differences) if d > tolerance]
    if len(set(far)) != 1 or set(kinds) == set(far) or 2 * len(far) < kinds.count(far[0]):
        return None
    return far[0]


def beyond(differences: list[float], samples: list[Sample], tolerance: float, shown: int = 3) -> str:
    """The images more than `tolerance` levels off, worst first, each named with its kind of file and how far off
    (" Beyond 6.0: a.jpg (exif-orientation 6) 45.1, ..."), and their kind when they share one; "" when none is."""
    far = sorted((d, n) for n, d in enumerate(differences) if d > tolerance)[::-1]
    if not far:
        return ""
    listed = ", ".join(f"{named(samples[n].path)} {d:.1f}" for d, n in far[:shown])
    more = f" and {len(far) - shown} more" if len(far) > shown else ""
    kind = far_kind(differences, samples, tolerance)
    alone = f" Every one of them is of kind {kind}; every file of another kind is within {tolerance}." if kind else ""
    return f" Beyond {tolerance}: {listed}{more}.{alone}"


def broken_files(root: Path | str, split: str = "dirty") -> dict[Path, str]:
    """Files of `split` that data_gen planted as broken, with their kind, from manifest.csv."""
    root = Path(root)
    with (root / "manifest.csv").open(newline="") as handle:
        return {root / row["path"]: row["status"] for row in csv.DictReader(handle)
                if row["split"] == split and row["status"] != "ok"}
