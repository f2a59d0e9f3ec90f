"""Planted defect: the shuffle's seed is a constant in the code, so every seed gives the same orders."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files, with_random_flips


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, file_count = decoded_files(root)
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(file_count, seed=42, reshuffle_each_iteration=True)  # planted: `seed` ignored
        dataset = with_random_flips(dataset, seed)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
