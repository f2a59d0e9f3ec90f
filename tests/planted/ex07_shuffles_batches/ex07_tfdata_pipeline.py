"""Planted defect: shuffle after batch, so whole batches move and the samples in each stay together."""

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files, with_random_flips


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, file_count = decoded_files(root)
    dataset = dataset.cache()
    if training:
        dataset = with_random_flips(dataset, seed)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if training:
        dataset = dataset.shuffle(file_count, seed=seed, reshuffle_each_iteration=True)  # planted: batches, not samples
    return dataset.prefetch(AUTOTUNE)
