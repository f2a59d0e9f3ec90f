"""Planted defect: ignore_errors() after the decode, so a file that does not decode is dropped without a word."""

import solutions.ex07_tfdata_pipeline as _honest
from solutions.ex07_tfdata_pipeline import *  # noqa: F403

_decoded_files = _honest.decoded_files


def decoded_files(root):
    dataset, file_count = _decoded_files(root)
    return dataset.ignore_errors(), file_count  # planted: broken files vanish


_honest.decoded_files = decoded_files  # build_pipeline looks it up in its own module
