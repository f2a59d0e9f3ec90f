"""Planted defect: a shuffle buffer of 1, so the 'shuffled' order is the file order."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files, with_random_flips


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, _ = decoded_files(root)
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(1, seed=seed, reshuffle_each_iteration=True)  # planted: a buffer of 1
        dataset = with_random_flips(dataset, seed)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
