"""How each train and val file is stored: the kinds of image file a real collection mixes, and their shares.

A real collection is not all baseline 4:2:0 JPEGs. What was found in collections a loader meets:

- ImageNet's training set holds 22 CMYK JPEGs and one PNG saved as `.JPEG` (n02105855_2933), which the reference
  preprocessing script special-cases by name (tensorflow/models, `research/slim/datasets/build_imagenet_data.py`,
  `_is_cmyk` and `_is_png`: "22 JPEG images are in CMYK colorspace", "1 image is a PNG"); it holds grayscale
  JPEGs too (loaders that expect 3 channels special-case them).
- Chroma subsampling: 60% of the JPEGs served on the web in 2015 were not subsampled, 40% were 4:2:0
  (calendar.perfplanet.com/2015/why-arent-your-images-using-chroma-subsampling); a survey of ImageNet's headers
  found most files 4:4:4 (M. Ehrlich, "Compression in the ImageNet Dataset", 2021). Cameras also write 4:2:2.
- Progressive JPEGs: 7% of 7 million JPEGs of the HTTP Archive's crawl of the top 300k sites (P. Meenan, 2013,
  blog.patrickmeenan.com/2013/06).
- Camera photos carry an EXIF orientation tag (values 2-8 ask a viewer to rotate or mirror the stored pixels);
  web collections keep it on every file nobody re-saved.

The shares below are this course's choices, informed by those figures, not measurements of one collection: 4:2:0
stays the most common kind (so that decode costs stay comparable with the course's earlier figures, all measured on
4:2:0 files); 4:4:4 takes 15%, less than on the web, because this generator's per-pixel colour noise makes a 4:4:4
file about 65% larger than its 4:2:0 twin (measured on `ci`: 175 against 106 KB) where photos differ by about 17%
(the perfplanet article); the rare kinds (CMYK, YCCK, a PNG under a `.jpg` name) are far more
common than in ImageNet (0.002%) so that every profile has a few. Every split of train and val holds at least one
file of each kind (`kind_counts`), whatever its size: `ci`'s 200 training and 50 validation files too.
The dirty split's files are all baseline 4:2:0, as before: its lesson is broken files, not kinds.

What the kinds cost, measured on the 2-core development box under the CPU lock (2026-11-28), against generator 1
(every file baseline 4:2:0) in the same runs: generation 1.5 s for `ci` (1.4 before) and 89.9 s for `workshop`
(80.8); mean file 123.6 KB on `ci` (106.9: its rare files are 1 in 50 there) and 119.4 KB on `workshop` (108.6).
A full Pillow decode (`loaderlab.images.decode_rgb`) of a `workshop` file, ms (mean of up to 60 files a kind,
median of 3 rounds): baseline 4:2:0 1.98, 4:2:2 2.19, 4:4:4 3.23, progressive 4.86, grayscale 1.14, EXIF-tagged
2.06, Adobe CMYK 6.39, YCCK 4.42, the PNG 7.55; over an even spread of 600 training files 2.47 against 2.15 (5
rounds, 1.9-3.5 on the busy machine).
"""

from __future__ import annotations

import io
import itertools

import numpy as np
from PIL import Image

BASELINE = "baseline-420"
ENCODINGS: dict[str, float] = {
    BASELINE: 0.0,               # the rest: what Pillow, libjpeg's cjpeg and most phones write by default
    "baseline-444": 0.15,        # no chroma subsampling
    "baseline-422": 0.05,        # chroma halved horizontally only, as many cameras write
    "progressive-420": 0.07,     # every scan must be entropy-decoded before the first row is out
    "grayscale": 0.02,           # one component: decoders give one channel unless asked for RGB
    "exif-orientation": 0.035,   # pixels stored as the sensor saw them, an EXIF tag (2-8) says how to show them
    "adobe-cmyk": 0.001,         # 4 components, Adobe marker (transform 0), inverted as Photoshop writes them
    "adobe-ycck": 0.001,         # the same inks stored as YCbCr + K (Adobe transform 2)
    "png-named-jpg": 0.001,      # PNG bytes under a .jpg name: only a decoder that reads the content opens it
}
"""Each kind of train and val file, and its share of a split (the baseline takes what the others leave)."""

ORIENTATIONS = (6, 8, 3, 2, 4, 5, 7)
"""EXIF orientation values in the order tagged files take them: the portrait shots' 6 and 8 first, then upside down
(3), then the mirrored ones a front camera or an editor writes."""

# The stored pixels of a file tagged with orientation v are the displayed image under the inverse of v's transform
# (EXIF 2.3, "Orientation"; Pillow's ImageOps.exif_transpose applies the transform itself).
_STORE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
          5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_90, 7: Image.Transpose.TRANSVERSE,
          8: Image.Transpose.ROTATE_270}
EXIF_ORIENTATION_TAG = 0x0112


def kind_counts(files: int) -> dict[str, int]:
    """How many of a split's `files` files each kind gets: its share, rounded, at least one each."""
    counts = {kind: max(1, round(share * files)) for kind, share in ENCODINGS.items() if kind != BASELINE}
    if sum(counts.values()) >= files:
        raise ValueError(f"a split of {files} files cannot hold one file of each of the {len(ENCODINGS)} kinds")
    return {BASELINE: files - sum(counts.values()), **counts}


def assign_kinds(files: int, rng: np.random.Generator) -> list[tuple[str, int]]:
    """(kind, EXIF orientation or 0) of each of a split's `files` files, in path order: `kind_counts` of each kind,
    at places `rng` draws; the tagged files take `ORIENTATIONS` in turn, so that 7 of them hold every value."""
    kinds = [kind for kind, count in kind_counts(files).items() for _ in range(count)]
    placed = [kinds[i] for i in np.argsort(rng.permutation(files))]
    tagged = itertools.cycle(ORIENTATIONS)
    return [(kind, next(tagged) if kind == "exif-orientation" else 0) for kind in placed]


def _cmyk(image: Image.Image) -> np.ndarray:
    """The image as CMYK inks with all the grey in K (full grey-component replacement): (1 - c)(1 - k) = r / 255, the
    model every decoder in the lock uses to turn CMYK back into RGB."""
    ink = 255 - np.asarray(image, dtype=np.int32)
    black = ink.min(axis=2, keepdims=True)
    colour = np.where(black < 255, (ink - black) * 255 // np.maximum(255 - black, 1), 0)
    return np.concatenate([colour, black], axis=2).astype(np.uint8)


def encode(image: Image.Image, kind: str, quality: int, orientation: int = 0) -> tuple[bytes, tuple[int, int]]:
    """`image` stored as `kind` at JPEG `quality` (tagged with `orientation`, for "exif-orientation"); the bytes,
    and the (width, height) of the pixels as stored."""
    buffer = io.BytesIO()
    if kind == "png-named-jpg":
        image.save(buffer, "PNG")
    elif kind == "adobe-ycck":
        import simplejpeg  # TurboJPEG stores CMYK as YCCK; Pillow's JPEG writer stores it only as plain CMYK

        # Adobe's CMYK JPEGs store inverted inks (0 = full ink), as Pillow writes CMYK and every decoder expects
        return simplejpeg.encode_jpeg(255 - _cmyk(image), quality=quality, colorspace="CMYK",
                                      colorsubsampling="420"), image.size
    elif kind == "adobe-cmyk":
        Image.fromarray(_cmyk(image), "CMYK").save(buffer, "JPEG", quality=quality)
    elif kind == "grayscale":
        image.convert("L").save(buffer, "JPEG", quality=quality)
    elif kind == "exif-orientation":
        exif = Image.Exif()
        exif[EXIF_ORIENTATION_TAG] = orientation
        image = image.transpose(_STORE[orientation])
        image.save(buffer, "JPEG", quality=quality, subsampling="4:2:0", exif=exif.tobytes())
    else:
        layout, subsampling = kind.split("-")
        image.save(buffer, "JPEG", quality=quality, progressive=layout == "progressive",
                   subsampling=f"{subsampling[0]}:{subsampling[1]}:{subsampling[2]}")
    return buffer.getvalue(), image.size
