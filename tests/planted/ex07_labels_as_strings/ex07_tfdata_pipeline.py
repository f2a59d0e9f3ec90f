"""Planted defect: the label is the class folder's name, a string, not its index."""

import os

import tensorflow as tf

import solutions.ex07_tfdata_pipeline as _honest
from solutions.ex07_tfdata_pipeline import *  # noqa: F403


def load_and_label(path, classes):
    return _honest.decode_center_crop(tf.io.read_file(path)), tf.strings.split(path, os.sep)[-2]  # planted


_honest.load_and_label = load_and_label  # build_pipeline looks it up in its own module
