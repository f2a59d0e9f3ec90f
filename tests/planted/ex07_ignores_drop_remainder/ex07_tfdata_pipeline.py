"""Planted defect: drop_remainder is accepted but never passed on, so the last partial batch always comes."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import build_pipeline as _honest_build


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    return _honest_build(root, batch_size, training, seed)  # planted: drop_remainder ignored
