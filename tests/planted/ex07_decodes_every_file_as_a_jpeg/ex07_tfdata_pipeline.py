"""Planted defect: the crop reads every file as a JPEG (tf.io.extract_jpeg_shape and decode_and_crop_jpeg, the route
that decodes only the crop's window), so the PNG saved under a .jpg name raises instead of giving its crop."""

import tensorflow as tf

from loaderlab.images import CROP
from loaderlab.tfdata import _jpeg_window, folder_label
from solutions.ex07_tfdata_pipeline import *  # noqa: F403


def load_and_label(path, classes):
    window, scale, translation = _jpeg_window(tf.io.read_file(path))  # planted: no route for a file that is no JPEG
    cropped = tf.raw_ops.ScaleAndTranslate(images=window[tf.newaxis], size=[CROP, CROP], scale=scale,
                                           translation=translation, kernel_type="triangle", antialias=True)[0]
    return tf.ensure_shape(tf.cast(cropped + 0.5, tf.uint8), (CROP, CROP, 3)), folder_label(path, classes)
