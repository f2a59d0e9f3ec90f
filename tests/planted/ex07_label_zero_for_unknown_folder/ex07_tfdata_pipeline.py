"""Planted defect: the label is the argmax of the folder matches, so a folder that is not a class silently gets label 0."""

import os

import tensorflow as tf

import solutions.ex07_tfdata_pipeline as _honest
from solutions.ex07_tfdata_pipeline import *  # noqa: F403


def load_and_label(path, classes):
    folder = tf.strings.split(path, os.sep)[-2]
    label = tf.argmax(tf.cast(tf.equal(classes, folder), tf.int64), output_type=tf.int64)  # planted: no match gives 0
    return _honest.decode_center_crop(tf.io.read_file(path)), label


_honest.load_and_label = load_and_label  # build_pipeline looks it up in its own module
