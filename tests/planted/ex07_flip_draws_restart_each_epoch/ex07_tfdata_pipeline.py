"""Planted defect: the flip seeds come from Dataset.random(seed) without rerandomize_each_iteration, so the same
sequence of draws restarts every epoch: only the shuffle moves the images under the same flips by position."""

import tensorflow as tf

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files, random_flip


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, file_count = decoded_files(root)
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(file_count, seed=seed, reshuffle_each_iteration=True)
        draws = tf.data.Dataset.random(seed=seed).batch(2)  # planted: the same draws every epoch
        dataset = tf.data.Dataset.zip(dataset, draws).map(lambda element, draw: random_flip(*element, draw),
                                                          num_parallel_calls=AUTOTUNE)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
