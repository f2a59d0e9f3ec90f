"""tf.data helpers shared by notebook 05, exercise 07 and its grader: the file list, the crop, the label, the naive
pipeline and the options that make it naive (notebook 05's ladder and timelines: `loaderlab.lessons.m05_tfdata`).

One definition of the dataset: the files are `loaderlab.images.list_samples(root)` (every
`IMAGE_SUFFIXES` file under `root/<class>/`, sorted by class then name), handed to tf.data as
paths. TensorFlow is imported inside the functions that need it, so `loaderlab` stays
importable where TensorFlow is not installed.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loaderlab.images import CROP, RESIZE, class_names, list_samples

if TYPE_CHECKING:
    import tensorflow as tf

CLASSES_SHOWN = 20  # how many class names an unknown-folder error lists


def image_paths(root: Path | str) -> list[str]:
    """Every image file of `root/<class>/` as a string, in `list_samples` order (sorted by class, then file name).

    The same files as `list_samples` (JPEG and PNG, `IMAGE_SUFFIXES`), so a tf.data pipeline and
    the reference agree on what the dataset is; raises its clear errors for a missing root or an
    empty class folder.
    """
    return [str(sample.path) for sample in list_samples(root)]


def _crop_geometry(size: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """For an image of `size` = (height, width) pixels, short side resized to RESIZE, then cropped to CROP in the middle
    (as `loaderlab.images.resize_center_crop` does): the pixels the crop depends on, and the resize that makes it from them.

    Returns (start, length, scale, translation), each a (rows, columns) pair: the crop is
    ScaleAndTranslate(the window of `length` pixels from `start`, CROP, scale, translation). The window is the crop's
    source span plus the antialiasing kernel's reach (its radius is max(1, 1/scale) pixels) and one pixel against float
    rounding, clipped to the image: the weights are those of a resize of the whole image. Both axes at once, as pairs:
    half the graph's ops of one axis at a time.
    """
    import tensorflow as tf

    new_size = RESIZE * size // tf.reduce_min(size)  # the short side to RESIZE, the long one in proportion (rounded down)
    offset = tf.round(tf.cast(new_size - CROP, tf.float32) / 2)  # where the crop starts in the resized image
    scale = tf.cast(new_size, tf.float32) / tf.cast(size, tf.float32)
    reach = tf.math.ceil(tf.maximum(1.0, 1.0 / scale)) + 1.0
    start = tf.maximum(0, tf.cast(tf.floor(offset / scale - reach), tf.int32))
    end = tf.minimum(size, tf.cast(tf.math.ceil((offset + CROP) / scale + reach), tf.int32))
    return start, end - start, scale, tf.cast(start, tf.float32) * scale - offset


def decode_center_crop(data: tf.Tensor) -> tf.Tensor:
    """Encoded image bytes (JPEG or PNG) -> uint8 (224, 224, 3): short side resized to 256 (bilinear, antialiased), centre crop.

    The sizes and offsets follow `loaderlab.images.reference_crop` (Pillow). Only the pixels the
    crop keeps are decoded and resized:
    - a whole JPEG (its bytes start with a JPEG marker and end with the end-of-image one) is
      decoded only inside the crop's window (plus the resize kernel's reach): the header gives
      the size (`tf.io.extract_jpeg_shape`), `tf.io.decode_and_crop_jpeg` the window. In a
      baseline JPEG the blocks above the window and beside it in its rows are entropy-decoded
      (the bit stream is read in order) and skip the inverse DCT and the colour conversion; the
      rows below the window are not decoded at all (libjpeg-turbo's `jpeg_skip_scanlines` to the
      bottom stops reading). In a progressive JPEG every scan is entropy-decoded up front, so
      there the window saves only the inverse DCT and the colour work. Anything else (a PNG, a
      JPEG cut short or with bytes after its end) is decoded whole by `tf.io.decode_image`,
      which tells the format by the bytes and raises for a file that does not decode; the
      window is then sliced out of it. Since a baseline file's rows below the window are never
      read, the window's decode alone reads a file cut short there without an error, hence the
      test of the last two bytes. Every
      kind of JPEG the dataset holds (`data_gen.encodings`) takes the window's route: with
      channels=3 TensorFlow replicates grayscale and turns Adobe CMYK and YCCK into RGB itself; it
      applies no EXIF orientation;
    - the window goes straight to 224x224 through the triangle kernel of
      `tf.image.resize(..., antialias=True)`, at the whole-image resize's fractional scale and
      offset (`tf.raw_ops.ScaleAndTranslate`, the op that call runs).
    The pixels are those of decoding and resizing the whole image and cropping (no pixel more than 1 off). A JPEG is
    decoded with `dct_method="INTEGER_ACCURATE"`, the accurate integer IDCT Pillow uses (TensorFlow's default fast IDCT
    made most of the crop's difference from the reference); `tf.io.decode_image`, the other path, has no such argument.
    It runs as one tf.function, traced once per process, so a pipeline that maps it does not trace it again. What was
    measured to choose this design, and the variants left out: `docs/measurements/tfdata-crop.md`.
    """
    return _traced(_decode_center_crop, ((), "string"))(data)


@functools.cache
def _traced(graph: Callable[..., tf.Tensor],
            *signature: tuple[tuple[int | None, ...], str]) -> Callable[..., tf.Tensor]:
    """`graph` as a tf.function of tensors of `signature` ((shape, dtype name) each), made and traced on first use,
    once per process: a pipeline built anew every epoch calls it instead of tracing the graph again."""
    import tensorflow as tf

    return tf.function(graph, input_signature=[tf.TensorSpec(shape, getattr(tf, dtype)) for shape, dtype in signature])


JPEG_END = b"\xff\xd9"  # the end-of-image marker, the last two bytes of a whole JPEG


def _decode_center_crop(data: tf.Tensor) -> tf.Tensor:
    """`decode_center_crop`'s graph."""
    import tensorflow as tf

    last_two = tf.strings.substr(data, tf.maximum(tf.strings.length(data) - 2, 0), 2)
    whole_jpeg = tf.logical_and(tf.io.is_jpeg(data), tf.equal(last_two, JPEG_END))
    window, scale, translation = tf.cond(whole_jpeg, lambda: _jpeg_window(data), lambda: _sliced_window(data))
    cropped = tf.raw_ops.ScaleAndTranslate(images=window[tf.newaxis], size=[CROP, CROP], scale=scale,
                                           translation=translation, kernel_type="triangle", antialias=True)[0]
    # The triangle's weights are positive and sum to 1, so every value lies in 0..255: +0.5 and a truncating cast round it
    # (two passes over the crop instead of round, clip and cast).
    return tf.ensure_shape(tf.cast(cropped + 0.5, tf.uint8), (CROP, CROP, 3))


def _jpeg_window(data: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """A whole JPEG's crop window, decoded alone, with the scale and translation that resize it (`_crop_geometry`)."""
    import tensorflow as tf

    start, length, scale, translation = _crop_geometry(tf.io.extract_jpeg_shape(data)[:2])
    window = tf.io.decode_and_crop_jpeg(data, tf.concat([start, length], 0), channels=3,
                                        dct_method="INTEGER_ACCURATE")  # Pillow's IDCT: see decode_center_crop
    return window, scale, translation


def _sliced_window(data: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Any image's crop window, sliced out of its whole decode, with the scale and translation that resize it."""
    import tensorflow as tf

    image = tf.io.decode_image(data, channels=3, expand_animations=False)
    start, length, scale, translation = _crop_geometry(tf.shape(image)[:2])
    return tf.slice(image, tf.concat([start, [0]], 0), tf.concat([length, [-1]], 0)), scale, translation


def folder_label(path: tf.Tensor, classes: tf.Tensor) -> tf.Tensor:
    """The int64 index of `path`'s parent folder name in `classes` (a sorted 1-D string tensor).

    A folder that is not exactly one of `classes` raises InvalidArgumentError naming it and the
    file: a silent 0 would train the model on a wrong label. Like `decode_center_crop`, one
    tf.function traced once per process, of few ops (`tf.debugging.Assert` would wrap the check in a
    tf.cond, which every new iterator instantiates again: see `docs/measurements/tfdata-crop.md`).
    """
    return _traced(_folder_label, ((), "string"), ((None,), "string"))(path, classes)


SEPARATOR = re.escape(os.sep)
PARENT_FOLDER = f"^(?:.*{SEPARATOR})?([^{SEPARATOR}]+){SEPARATOR}[^{SEPARATOR}]*$"  # a path -> its parent folder's name


def _folder_label(path: tf.Tensor, classes: tf.Tensor) -> tf.Tensor:
    """`folder_label`'s graph."""
    import tensorflow as tf

    folder = tf.strings.regex_replace(path, PARENT_FOLDER, r"\1")  # a path without a folder stays whole: no class
    matches = tf.equal(classes, folder)
    found = tf.raw_ops.Assert(
        condition=tf.equal(tf.math.count_nonzero(matches), 1),
        data=["folder_label: the folder", folder, "of", path, "is not one of the class folders", classes],
        summarize=CLASSES_SHOWN,
    )
    with tf.control_dependencies([found]):
        return tf.argmax(tf.cast(matches, tf.int64), output_type=tf.int64)


def without_automatic_optimizations(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's default rewrites off, so that it runs exactly as written.

    By default tf.data parallelizes stateless maps (map_parallelization), adds a final
    prefetch (inject_prefetch) and fuses map + batch into one op that works in a
    background thread (map_and_batch_fusion): a "naive" pipeline is only naive with
    those turned off.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    options.experimental_optimization.map_parallelization = False
    options.experimental_optimization.map_and_batch_fusion = False
    options.experimental_optimization.inject_prefetch = False
    return dataset.with_options(options)


def on_one_thread(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` run by one tf.data thread, each op on one thread: what a pipeline gains there is work
    avoided or overlapped with a wait, never extra cores (graders time cache and prefetch this way)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    return dataset.with_options(options)


def naive_pipeline(root: Path | str, batch_size: int) -> tf.data.Dataset:
    """The baseline: the files of `image_paths` -> map(read, decode, crop, label) one element at a time -> batch.

    No parallel calls, no cache, no prefetch, and tf.data's automatic versions of them
    turned off: each element is read and decoded only when the consumer asks for it.
    Order: sorted, like `list_samples`.
    """
    import tensorflow as tf

    classes = tf.constant(class_names(root))

    def load(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return decode_center_crop(tf.io.read_file(path)), folder_label(path, classes)

    files = tf.data.Dataset.from_tensor_slices(image_paths(root))
    return without_automatic_optimizations(files.map(load).batch(batch_size))
