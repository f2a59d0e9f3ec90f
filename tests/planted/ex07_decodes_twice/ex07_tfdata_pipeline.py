"""Planted defect: the shuffle buffer is sized by counting the decoded dataset (reduce), so every file is decoded twice."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files, with_random_flips


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, _ = decoded_files(root)
    file_count = int(dataset.reduce(0, lambda count, _: count + 1))  # planted: a whole decoding pass to count
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(file_count, seed=seed, reshuffle_each_iteration=True)
        dataset = with_random_flips(dataset, seed)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
