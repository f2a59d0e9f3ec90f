"""Planted defect: labels squeezed after batch (a habit from (N, 1) label tensors): a batch of one gets a bare scalar label."""

import tensorflow as tf

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import build_pipeline as _honest_build


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset = _honest_build(root, batch_size, training, seed, drop_remainder)
    return dataset.map(lambda images, labels: (images, tf.squeeze(labels)))  # planted: shape () for a batch of 1
