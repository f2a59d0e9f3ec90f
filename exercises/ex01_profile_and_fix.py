"""Exercise 01: measure where the time goes, then a sequential loader that is right first and fast second.

Five steps; the grader reports each one, so you can stop after any step with something that passes it.

1. Profile the stages (`profile_stages`, `find_bottleneck`): time each stage of a pipeline and name
   the slowest. Profile before you tune, or you will speed up the wrong stage.
2. Right on clean data (`load_batches`): batches of the reference centre crops, in sample order.
3. Bad files reported (`load_batches`): skip what does not decode, say which and why; never lose a
   file silently, never hide a wrong path.
4. Speed (`load_batches`): the cheap wins, without threads, processes or caches, at least 1.5x the
   naive loop of `loaderlab.baselines`.
5. Decode less (`decode_less_crop`): one crop at least 1.75x `reference_crop`, by decoding and resampling
   only what the crop keeps, within the course's pixel tolerance of it on every image the contract names, those
   at the edge of each DCT scale included.

Files: Every kind of file the dataset mixes (`data_gen.encodings`: progressive, 4:2:2 and 4:4:4, grayscale, Adobe
CMYK and YCCK, EXIF-tagged camera files, a PNG under a .jpg name) gives the reference's pixels (`loaderlab.images`:
read by its content, kept as stored with no EXIF rotation, grayscale as three equal channels, CMYK as Pillow
converts it).

Notebook 01 measures every idea used here. Grade: `pytest grader/test_ex01_profile_and_fix.py`.
Hints: `make hint EX=ex01 LEVEL=1` (then 2, 3, ...), from a nudge to nearly the answer for steps 1-4, where and how
to measure for step 5; a check the grade names has its own levels, up to its fix (`CHECK=<check> LEVEL=2`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loaderlab.images import Sample


def profile_stages(stages: Sequence[tuple[str, Callable[[Any], Any]]], inputs: Iterable[Any]) -> dict[str, float]:
    """Feed each input through the stages in order and return the seconds spent in each stage.

    Contract (the grader checks each point):
    - `stages` is a list of (name, function) pairs, any number of them; `inputs` is any iterable
      (a list, a generator: read it once);
    - each stage is called exactly once per input, on the previous stage's output (the first
      stage on the input itself);
    - the result maps every stage name to its total wall-clock seconds over all inputs, in stage
      order: a stage that waits (on storage, on a lock) counts as much as one that computes.
    """
    # TODO(ex01, step 1): time every stage call on its own and add it to that stage's total. Why: one
    # time per input tells you the loader is slow; a total per stage tells you what to fix.
    raise NotImplementedError("TODO(ex01, step 1) in exercises/ex01_profile_and_fix.py: profile_stages")


def find_bottleneck(seconds_by_stage: Mapping[str, float]) -> str:
    """The name of the stage that took the most time; on a tie, the first of the tied stages in order."""
    # TODO(ex01, step 1): name the stage with the largest total. Ties go to the earliest stage, so the
    # same profile always names the same stage.
    raise NotImplementedError("TODO(ex01, step 1) in exercises/ex01_profile_and_fix.py: find_bottleneck")


@dataclass(frozen=True)
class Skipped:
    """A file the loader could not use, and why."""

    path: Path
    reason: str


def load_batches(
    samples: Sequence[Sample], batch_size: int = 32, skipped: list[Skipped] | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (images, labels) batches of `samples`, in sample order.

    Contract (the grader checks each point):
    - step 2: images are uint8 arrays (N, 224, 224, 3), RGB: the centre crops of
      `loaderlab.images.reference_crop` (short side resized to 256, then the centre 224x224),
      within 2.5 levels of 255 on average over the images and 10 for any one image. Each image
      is compared at its best alignment with the reference, in half-pixel steps up to 1.5
      pixels, so a crop placed a fraction of a pixel differently is fine. Labels are int64
      arrays (N,). Every batch holds `batch_size` images except the last, which is yielded even
      when short; no batch is empty. Any batch_size from 1 up works, also one larger than the
      number of samples.
    - step 3: a file that does not decode (truncated, empty, a bad header, not an image) is
      skipped: no batch gets a hole, a None or a stand-in for it. Each one is logged as a warning
      (the `logging` module, WARNING or above) naming the file and the reason, and, when
      `skipped` is a list, appended to it as `Skipped(path, reason)`. With `skipped=None` (the
      default) the log is the only report. A file that does not exist raises FileNotFoundError.
    - step 4: at least 1.5x the naive loop's images/s, from cheaper decoding in the calling
      thread: no threads or processes (modules 02 and 03), and no cache between calls (every
      call reads and decodes the files as they are now).
    """
    # TODO(ex01, step 2): decode each sample to its centre crop (reference_crop is right, and slow:
    # step 4 replaces it), and fill batches with the crops as they come. Counting the images you
    # hold, rather than the samples you have read, is what keeps batches full once step 3 skips
    # some.
    # TODO(ex01, step 3): some files in a real dataset do not decode. Skip each one and report it, then
    # go on with the next file. Let a missing file raise: a wrong path is a bug in the sample list,
    # and skipping it would hide the bug.
    # TODO(ex01, step 4): profile your loader with your profile_stages, then make the slowest stage cheaper:
    # stay in uint8, let the JPEG decoder skip the pixels the resize would throw away, and resample
    # once, from the decoded image straight to 224x224. Notebook 01, section 3 measures each win.
    raise NotImplementedError("TODO(ex01, step 2) in exercises/ex01_profile_and_fix.py: load_batches "
                              "(steps 3 and 4 are TODOs in the same function)")


def decode_less_crop(path: Path | str) -> np.ndarray:
    """The reference centre crop of one image file, as uint8 (224, 224, 3) RGB, doing only the work the crop keeps.

    Contract (the grader checks each point):
    - step 5: the crop is within `loaderlab.images.MEAN_TOLERANCE` (2.0 levels of 255, the mean over the images)
      and `WORST_TOLERANCE` (6.0 for any one image) of `reference_crop`, compared pixel for pixel (no alignment
      search), on every training image of the `ci` profile, whose sizes include each power-of-two DCT scale's
      edge: short sides of 511 and 512, 1023 and 1024, 2047 and 2048 px (there the crop window, 224/256 of the
      short side, is just under or just at 2, 4 and 8 x 224 px), landscape and portrait. On a larger profile the
      mean is over 200 training images spread evenly, and the 6.0 holds for those and for every training image
      whose crop window is at least 2 x 224 px on a side (the header gives the size). A file that is not a JPEG
      (a PNG) gives its crop too.
      Why a margin: a JPEG decoded at 1/2, 1/4 or 1/8 is not shrunk the way the reference shrinks it (notebook 01,
      section 5 measures how far, by image size). Which images that takes past the tolerance, and what keeps them
      within it, is yours to measure.
    - a file that does not decode raises one of `loaderlab.images.DECODE_ERRORS` (as Pillow and simplejpeg do),
      so that `load_batches` can skip it and report why.
    - each call reads and decodes the file as it is now (no cache between calls).
    - at least 1.75x `reference_crop`'s images/s, both on one thread, on the same 64 training images of ImageNet's
      size (crop window under 4 x 224 px), spread evenly.
    """
    # TODO(ex01, step 5): build a crop that does only the work the crop keeps. reference_crop decodes every pixel and
    # resizes the whole image, yet keeps one centre square (`loaderlab.images.crop_window(width, height)`): profile
    # its stages on a few files with your profile_stages to see what that costs. Notebook 01, section 5 measures
    # several ways to do less, each alone, with its speed beside its pixel error, on the ordinary images and on
    # those at a DCT scale's edge: choose the ones that pay on your machine, combine them, and check the edge
    # images before you trust an average.
    raise NotImplementedError("TODO(ex01, step 5) in exercises/ex01_profile_and_fix.py: decode_less_crop")
