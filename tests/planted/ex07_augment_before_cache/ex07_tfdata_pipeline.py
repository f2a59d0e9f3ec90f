"""Planted defect: augment before cache, so every epoch replays the first epoch's flips."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files, with_random_flips


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, file_count = decoded_files(root)
    if training:
        dataset = with_random_flips(dataset, seed)  # planted: the flip is cached with the image
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(file_count, seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
