"""Planted defect: the shuffle gets no seed, so two pipelines built with the same seed shuffle differently."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files, with_random_flips


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, file_count = decoded_files(root)
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(file_count, reshuffle_each_iteration=True)  # planted: no seed
        dataset = with_random_flips(dataset, seed)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
