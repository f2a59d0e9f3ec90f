"""Planted defect: the last partial batch is dropped whenever training, so some files miss every epoch."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import build_pipeline as _honest_build


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    return _honest_build(root, batch_size, training, seed, drop_remainder=drop_remainder or training)  # planted
